"""How an operator call finds its kernel: PyTorch's dispatcher seen from Python.

* :mod:`~infralens.dispatch.keys`: the dispatch keys of a tensor and of the thread, the kernel
  registered for each key of an operator, and two modes that log a call at the top (Python's
  ``torch`` functions) and at the bottom (ATen operators, after autograd) of the dispatcher.
* :mod:`~infralens.dispatch.extension`: a C++ operator registered with ``TORCH_LIBRARY``
  (``scaled_add.cpp``), compiled and loaded on the machine that runs it.
* :mod:`~infralens.dispatch.custom_ops`: an opaque kernel wrapped with
  ``torch.library.custom_op``, given a fake (shape) kernel and a backward, so autograd and
  ``torch.compile`` treat it as one node.
"""
