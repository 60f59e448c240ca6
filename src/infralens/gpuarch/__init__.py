"""GPU architecture and the memory hierarchy, as code: occupancy, rooflines, latency, scheduling.

* :mod:`~infralens.gpuarch.occupancy`: resident blocks per SM from first principles (registers,
  shared memory, warps, block slots, barriers), with the allocation rules NVIDIA documents.
* :mod:`~infralens.gpuarch.roofline`: attainable FLOP/s = min(peak, intensity x bandwidth), the
  ridge point, and the arithmetic intensity of a matrix multiply.
* :mod:`~infralens.gpuarch.ceilings`: the measured ceilings of the GPU a cell runs on (bf16
  matmul rate, copy bandwidth, a sweep of skinny matmuls) for the roofline figure.
* :mod:`~infralens.gpuarch.occupancy_probe`: builds ``occupancy_probe.cu`` with nvcc and asks the
  CUDA runtime about real kernels (``cudaOccupancyMaxActiveBlocksPerMultiprocessor``), and
  measures load latency with a pointer chase.

* :mod:`~infralens.gpuarch.memory`: Little's law and the sectors a warp's access touches;
  :mod:`~infralens.gpuarch.schedule`: a toy warp scheduler; :mod:`~infralens.hardware.facts`:
  the architecture facts the chapter computes with, each with its source.

Import the submodules (``from infralens.gpuarch import occupancy``); the package re-exports
nothing, so that ``occupancy`` always names the module. Nothing here imports torch at import
time; the measuring functions import it when called.
"""
