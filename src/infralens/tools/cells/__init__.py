"""GPU cells: find them in the book's pages, run them on a CUDA machine, and record the results.

The CPU build never executes a cell tagged ``gpu``. This package runs those cells where a GPU is
(``python -m infralens.tools.cells run``), writes one record per cell under ``book/_records/<record>/`` with
its provenance, and reads the latest record back for the CPU build (:func:`records.latest`).
It needs only the standard library, PyYAML and what a CUDA PyTorch machine already has.
"""
