// Chapter 1: how an SM issues and holds work, measured on the GPU itself.
//
// * sm_ffma_chain: every thread runs one chain of dependent FMAs. With one warp, the time per FMA
//   is the dependent-issue latency; with more warps, the FMA warp-instructions issued per clock
//   show how many warps a scheduler needs to issue every cycle.
// * sm_resident: every block records the SM it runs on (%smid) and the global timer (%globaltimer,
//   nanoseconds) when it starts and when it ends, and spins in between, so that the blocks an SM
//   can hold at once overlap in time. Counting the overlaps measures residency itself, where
//   cudaOccupancyMaxActiveBlocksPerMultiprocessor only computes what the rules allow.
// * sm_divergent: a branch whose two paths do different work, followed by a warp shuffle that needs
//   every lane again; its SASS shows the convergence barrier the compiler sets around the branch.
//
// Host functions are extern "C" and return a cudaError_t as int (0 = success), for
// infralens/gpuarch/sm_probe.py to call through ctypes.

#include <cuda_runtime.h>
#include <stdint.h>

// [gpuarch:divergent]
// Lanes with a positive input run a loop whose trip count depends on the data; the others compute
// one exponential. The shuffle after the branch exchanges values between neighbouring lanes, so
// every lane of the warp must have left the branch before it executes.
extern "C" __global__ void sm_divergent(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  if (v > 0.0f) {
    for (int k = 0; k < static_cast<int>(v); ++k) v = v * 0.5f + 1.0f;
  } else {
    v = __expf(v) - 1.0f;
  }
  float neighbour = __shfl_xor_sync(0xffffffffu, v, 1);
  if (i < n) y[i] = v + neighbour;
}
// [/gpuarch:divergent]

// [gpuarch:ffma-chain]
// One block of `blockDim.x` threads: every thread runs `steps` FMAs, each needing the result of the
// one before it. Thread 0 reads the SM's cycle counter after a barrier before the chains and after
// one behind them, so `cycles` spans the slowest warp.
extern "C" __global__ void sm_ffma_chain(int steps, float b, float c, float* sink, long long* cycles) {
  float a = static_cast<float>(threadIdx.x);
  __syncthreads();  // protects: every warp starts its chain after the first timestamp is near
  long long t0 = clock64();
#pragma unroll 16
  for (int s = 0; s < steps; ++s) a = fmaf(a, b, c);  // dependent: a is both input and output
  __syncthreads();  // protects: the second timestamp is taken after every warp has finished
  long long t1 = clock64();
  if (a == 12345.0f) sink[0] = a;  // keeps the chain live without a store per thread
  if (threadIdx.x == 0) cycles[0] = t1 - t0;
}
// [/gpuarch:ffma-chain]

// [gpuarch:residency]
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Every block holds its SM for `spin_ns` nanoseconds. Its block size and its dynamic shared memory
// are chosen at launch; the shared memory is allocated for the block's whole life, used or not.
extern "C" __global__ void sm_resident(long long spin_ns, unsigned* smid,
                                       unsigned long long* start, unsigned long long* end) {
  unsigned long long t0 = global_ns();
  while (global_ns() - t0 < static_cast<unsigned long long>(spin_ns)) {
  }
  __syncthreads();  // protects: the block's end is after every thread has spun
  if (threadIdx.x == 0) {
    smid[blockIdx.x] = sm_id();
    start[blockIdx.x] = t0;
    end[blockIdx.x] = global_ns();
  }
}
// [/gpuarch:residency]

extern "C" const char* sm_probe_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

// One launch of sm_ffma_chain with `threads` threads; the kernel's cycles are written to *cycles.
extern "C" int sm_probe_ffma(int threads, int steps, long long* cycles) {
  if (cycles == nullptr || threads <= 0 || steps <= 0) return cudaErrorInvalidValue;
  float* sink = nullptr;
  long long* d_cycles = nullptr;
  cudaError_t err = cudaMalloc(&sink, sizeof(float));
  if (err == cudaSuccess) err = cudaMalloc(&d_cycles, sizeof(long long));
  for (int pass = 0; pass < 2 && err == cudaSuccess; ++pass) {  // pass 0 warms the instruction cache
    sm_ffma_chain<<<1, threads>>>(steps, 0.999f, 0.5f, sink, d_cycles);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
  }
  if (err == cudaSuccess) err = cudaMemcpy(cycles, d_cycles, sizeof(long long), cudaMemcpyDeviceToHost);
  cudaFree(sink);
  cudaFree(d_cycles);
  return err;
}

// One launch of sm_resident: `grid` blocks of `threads` threads with `dyn` bytes of dynamic shared
// memory, each spinning `spin_ns`. The per-block SM ids and start and end times are copied out.
extern "C" int sm_probe_resident(int grid, int threads, long long dyn, long long spin_ns,
                                 unsigned* smid, unsigned long long* start, unsigned long long* end) {
  if (smid == nullptr || start == nullptr || end == nullptr || grid <= 0 || threads <= 0 ||
      dyn < 0 || spin_ns <= 0)
    return cudaErrorInvalidValue;
  unsigned* d_smid = nullptr;
  unsigned long long *d_start = nullptr, *d_end = nullptr;
  cudaError_t err = cudaFuncSetAttribute(sm_resident, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(dyn));
  if (err == cudaSuccess) err = cudaMalloc(&d_smid, grid * sizeof(unsigned));
  if (err == cudaSuccess) err = cudaMalloc(&d_start, grid * sizeof(unsigned long long));
  if (err == cudaSuccess) err = cudaMalloc(&d_end, grid * sizeof(unsigned long long));
  if (err == cudaSuccess) {
    sm_resident<<<grid, threads, static_cast<size_t>(dyn)>>>(spin_ns, d_smid, d_start, d_end);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaMemcpy(smid, d_smid, grid * sizeof(unsigned), cudaMemcpyDeviceToHost);
  if (err == cudaSuccess)
    err = cudaMemcpy(start, d_start, grid * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
  if (err == cudaSuccess)
    err = cudaMemcpy(end, d_end, grid * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
  cudaFree(d_smid);
  cudaFree(d_start);
  cudaFree(d_end);
  return err;
}
