"""``torch.compile`` taken apart: what Dynamo captures, what AOTAutograd derives, what Inductor
writes.

* :mod:`~infralens.compiler.capture`: run a function under ``torch.compile`` and keep each
  stage's artefact: Dynamo's FX graphs, graph breaks and guards (from the ``TORCH_LOGS``
  artifacts, read in-process), AOTAutograd's joint, forward and backward graphs, Inductor's
  generated source.
* :mod:`~infralens.compiler.examples`: the small functions the stages are shown on.
"""
