"""The autograd graph as data: the nodes a forward pass records, what they save, and a node
written by hand.

* :mod:`~infralens.autograd.graph`: walk a result's ``grad_fn`` through ``next_functions`` to
  the leaves; list what each node saved for backward.
* :mod:`~infralens.autograd.functions`: a custom ``torch.autograd.Function`` that saves less
  than the operators it replaces.
"""
