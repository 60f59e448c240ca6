// Test-only shim: NVIDIA's own occupancy calculator (cuda_occupancy.h, header-only host code)
// behind a C function, so the Python calculator can be compared with it on a machine without a
// GPU. Built by tests/gpuarch/test_occupancy.py with the host C++ compiler.
#include <cuda_occupancy.h>

extern "C" int ref_max_active_blocks(
    // device
    int major, int minor, int max_threads_per_block, int max_threads_per_sm, int regs_per_block,
    int regs_per_sm, int warp_size, long long smem_per_block, long long smem_per_sm,
    long long smem_per_block_optin, long long reserved_smem_per_block,
    // function and launch
    int num_regs, long long static_smem, long long max_dynamic_smem, int optin, int barriers,
    int block_size, long long dynamic_smem, int carveout_percent,
    // out: the per-resource limits (regs, smem, warps, blocks, barriers)
    int* limits) {
  cudaOccDeviceProp prop;
  prop.computeMajor = major;
  prop.computeMinor = minor;
  prop.maxThreadsPerBlock = max_threads_per_block;
  prop.maxThreadsPerMultiprocessor = max_threads_per_sm;
  prop.regsPerBlock = regs_per_block;
  prop.regsPerMultiprocessor = regs_per_sm;
  prop.warpSize = warp_size;
  prop.sharedMemPerBlock = (size_t)smem_per_block;
  prop.sharedMemPerMultiprocessor = (size_t)smem_per_sm;
  prop.numSms = 1;
  prop.sharedMemPerBlockOptin = (size_t)smem_per_block_optin;
  prop.reservedSharedMemPerBlock = (size_t)reserved_smem_per_block;

  cudaOccFuncAttributes attr;
  attr.maxThreadsPerBlock = max_threads_per_block;
  attr.numRegs = num_regs;
  attr.sharedSizeBytes = (size_t)static_smem;
  attr.shmemLimitConfig = optin ? FUNC_SHMEM_LIMIT_OPTIN : FUNC_SHMEM_LIMIT_DEFAULT;
  attr.maxDynamicSharedSizeBytes = (size_t)max_dynamic_smem;
  attr.numBlockBarriers = barriers;

  cudaOccDeviceState state;
  state.carveoutConfig = carveout_percent;

  cudaOccResult result;
  cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state,
                                                             block_size, (size_t)dynamic_smem);
  if (err != CUDA_OCC_SUCCESS) return -(int)err;  // -1 invalid input, -2 unknown device
  limits[0] = result.blockLimitRegs;
  limits[1] = result.blockLimitSharedMem;
  limits[2] = result.blockLimitWarps;
  limits[3] = result.blockLimitBlocks;
  limits[4] = result.blockLimitBarriers;
  return result.activeBlocksPerMultiprocessor;
}
