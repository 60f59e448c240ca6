"""Finding out why a training step is slow: the PyTorch profiler read programmatically, Nsight
Compute's sections read back from Python, and the workflow that connects them (Lab 09).

* :mod:`~infralens.profiling.trace`: profile a training step with ``torch.profiler`` and read
  the top operators, the idle gaps between them and the cost of launching kernels.
* :mod:`~infralens.profiling.targets`: the two kernels Lab 09 profiles with Nsight Compute, a
  memory-bound elementwise add and a compute-bound matmul, as a command line ncu can run.
"""
