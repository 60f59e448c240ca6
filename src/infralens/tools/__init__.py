"""The machinery every page needs and no reader studies, apart from the mechanisms the pages teach.

* :mod:`~infralens.tools.glue`: numbers from cells into prose (glue), Markdown tables, records;
* :mod:`~infralens.tools.bench`: the one timing harness (its policy stated once);
* :mod:`~infralens.tools.nvcc` and :mod:`~infralens.tools.ncu`: the CUDA compiler and profiler;
* :mod:`~infralens.tools.triton_compile`: Triton kernels compiled for a GPU on a machine without one;
* :mod:`~infralens.tools.cells`: the GPU-cell runner and its records (``python -m infralens.tools.cells``);
* :mod:`~infralens.tools.cli` and :mod:`~infralens.tools.checks`: one-line errors for bad input.

Nothing here imports torch, triton or IPython at import time.
"""
