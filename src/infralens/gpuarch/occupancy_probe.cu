// Chapter 1: real kernels whose occupancy the CUDA runtime is asked about, and a pointer chase that
// measures load latency at each level of the memory hierarchy.
//
// The kernels differ in the resource that limits how many of their blocks fit on one SM: a copy
// (warps), a shared-memory reduction and a padded transpose (warps or blocks, by block size), a
// register-blocked SGEMM (registers), the same SGEMM squeezed by __launch_bounds__ (registers
// again, now with spills) and a kernel that stages large tiles in dynamic shared memory (shared
// memory). Every kernel checks its bounds, so a launch with n = 0 is a valid no-op: the probe
// launches each one that way to show that a configuration the occupancy API rejects also fails to
// launch.
//
// Host functions are extern "C" and return a cudaError_t as int (0 = success), so that
// infralens/gpuarch/occupancy_probe.py can call them through ctypes and check every call.
//
// Build: nvcc -O3 -shared -Xcompiler -fPIC -arch=sm_90 occupancy_probe.cu -o probe.so
//        (occupancy_probe.build() does it, for the arch of the GPU it runs on).

#include <cuda_runtime.h>
#include <stdint.h>

#include <vector>

namespace {

constexpr int kGemmBlock = 256;          // threads of the SGEMM kernels: a 16 x 16 grid of threads
constexpr int kBM = 128, kBN = 128;      // SGEMM block tile: 128 x 128 outputs per block
constexpr int kBK = 8;                   // SGEMM depth of one shared-memory stage
constexpr int kTM = 8, kTN = 8;          // SGEMM thread tile: 8 x 8 accumulators in registers
constexpr int kTile = 32;                // transpose tile (the [32][33] layout of Lab 05)

}  // namespace

// [gpuarch:probe-copy]
// A vectorized grid-stride copy: a handful of registers, no shared memory. What limits it is the
// number of warps an SM can hold.
extern "C" __global__ void occ_copy(const float4* __restrict__ x, float4* __restrict__ y,
                                    long long n4) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride)
    y[i] = x[i];
}
// [/gpuarch:probe-copy]

// A block-wide sum in dynamic shared memory (one float per thread, Lab 04's tree): its shared
// memory grows with the block, 4 bytes per thread.
extern "C" __global__ void occ_reduce_dyn(const float* __restrict__ x, float* out, long long n) {
  extern __shared__ float s[];  // blockDim.x floats, sized at launch
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = (i < n) ? x[i] : 0.0f;
  __syncthreads();  // protects: every slot is written before any thread reads another's
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();  // protects: level k is complete before level k+1 reads it
  }
  if (threadIdx.x == 0 && n > 0) atomicAdd(out, s[0]);
}

// A transpose through a padded [32][33] tile in static shared memory (Lab 05): 4224 bytes per
// block whatever the block size, launched as 32 x 8 threads.
extern "C" __global__ void occ_transpose33(const float* __restrict__ in, float* __restrict__ out,
                                           int rows, int cols) {
  __shared__ float tile[kTile][kTile + 1];
  int c = blockIdx.x * kTile + threadIdx.x, r = blockIdx.y * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += blockDim.y)
    if (r + j < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[(long long)(r + j) * cols + c];
  __syncthreads();  // protects: the whole tile is loaded before it is read transposed
  c = blockIdx.y * kTile + threadIdx.x;
  r = blockIdx.x * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += blockDim.y)
    if (r + j < cols && c < rows) out[(long long)(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
}

// [gpuarch:probe-sgemm]
// C = A B (row-major, fp32) with 2-D register blocking: each of the 256 threads keeps an 8 x 8
// tile of C in registers (64 accumulators), so registers, not shared memory (8 KiB), limit how
// many blocks fit.
__device__ __forceinline__ void sgemm_8x8_body(const float* __restrict__ A,
                                               const float* __restrict__ B, float* __restrict__ C,
                                               int M, int N, int K) {
  __shared__ float As[kBK][kBM];  // A tile stored k-major: As[k][m]
  __shared__ float Bs[kBK][kBN];
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int tr = tid / (kBN / kTN), tc = tid % (kBN / kTN);  // this thread's 8 x 8 sub-tile
  float acc[kTM][kTN] = {};
  for (int k0 = 0; k0 < K; k0 += kBK) {
    for (int i = tid; i < kBM * kBK; i += kGemmBlock) {  // 1024 A elements, 4 per thread
      int m = i / kBK, k = i % kBK;
      As[k][m] = (row0 + m < M && k0 + k < K) ? A[(long long)(row0 + m) * K + k0 + k] : 0.0f;
    }
    for (int i = tid; i < kBK * kBN; i += kGemmBlock) {  // 1024 B elements, 4 per thread
      int k = i / kBN, n = i % kBN;
      Bs[k][n] = (k0 + k < K && col0 + n < N) ? B[(long long)(k0 + k) * N + col0 + n] : 0.0f;
    }
    __syncthreads();  // protects: both tiles are complete before any thread multiplies
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      float a[kTM], b[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i) a[i] = As[k][tr * kTM + i];
#pragma unroll
      for (int j = 0; j < kTN; ++j) b[j] = Bs[k][tc * kTN + j];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];  // 64 FMAs per 16 loads
    }
    __syncthreads();  // protects: nobody overwrites the tiles while another thread still reads
  }
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      int r = row0 + tr * kTM + i, c = col0 + tc * kTN + j;
      if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
    }
}

// No __launch_bounds__: the compiler may use up to 255 registers per thread, and any block size
// up to 1024 is accepted at compile time. The body computes C only for 256 threads; the probe
// asks about other block sizes (and launches them on an empty problem) to see where the register
// file stops them.
extern "C" __global__ void occ_sgemm_8x8(const float* A, const float* B, float* C, int M, int N,
                                         int K) {
  sgemm_8x8_body(A, B, C, M, N, K);
}

// The same body, but the compiler must fit 3 blocks of 256 threads per SM: at most
// 65536 / (3 * 256) = 85 registers per thread, rounded down to what the allocator can give.
// Registers that do not fit spill to local memory (cudaFuncAttributes::localSizeBytes).
extern "C" __global__ void __launch_bounds__(kGemmBlock, 3)
    occ_sgemm_8x8_lb3(const float* A, const float* B, float* C, int M, int N, int K) {
  sgemm_8x8_body(A, B, C, M, N, K);
}
// [/gpuarch:probe-sgemm]

// Stages tiles of `tile_floats` floats in dynamic shared memory and reads them back permuted: its
// shared memory is whatever the launch asks for, up to the opt-in maximum.
extern "C" __global__ void occ_stage_dyn(const float* __restrict__ x, float* out, long long n,
                                         int tile_floats) {
  extern __shared__ float tile[];
  float acc = 0.0f;
  for (long long base = (long long)blockIdx.x * tile_floats; base < n;
       base += (long long)gridDim.x * tile_floats) {
    for (int i = threadIdx.x; i < tile_floats; i += blockDim.x)
      tile[i] = (base + i < n) ? x[base + i] : 0.0f;
    __syncthreads();  // protects: the tile is complete before it is read out of order
    for (int i = threadIdx.x; i < tile_floats; i += blockDim.x)
      acc += tile[(long long)i * 33 % tile_floats];
    __syncthreads();  // protects: the next tile does not overwrite one still being read
  }
  if (n > 0) atomicAdd(out, acc);
}

// [gpuarch:chase]
// Pointer chase: one thread follows next[] for `steps` dependent loads, so each load waits for the
// one before it and the time per step is the latency of wherever the chain lives. `cg` selects
// ld.global.cg (cached in L2 only) instead of the default ld.global.ca (L1 and L2). The walk starts
// at *cursor and leaves its end there, so a second launch continues the chain instead of
// revisiting the nodes the first one just pulled into the caches.
extern "C" __global__ void lat_chase_global(const unsigned* __restrict__ next, int steps, int cg,
                                            unsigned* cursor, long long* cycles) {
  unsigned j = cursor[0];
  long long t0 = clock64();
  if (cg) {
    for (int s = 0; s < steps; ++s) j = __ldcg(next + j);
  } else {
    for (int s = 0; s < steps; ++s) j = __ldca(next + j);
  }
  long long t1 = clock64();
  cursor[0] = j;  // also keeps the chain live
  cycles[0] = t1 - t0;
}

// The same chase through shared memory: a chain of `n_words` words with a fixed stride.
extern "C" __global__ void lat_chase_shared(int n_words, int stride_words, int steps,
                                            unsigned* sink, long long* cycles) {
  extern __shared__ unsigned s_next[];
  for (int i = threadIdx.x; i < n_words; i += blockDim.x) s_next[i] = (i + stride_words) % n_words;
  __syncthreads();  // protects: the chain is complete before thread 0 follows it
  if (threadIdx.x != 0) return;
  unsigned j = 0;
  long long t0 = clock64();
  for (int s = 0; s < steps; ++s) j = s_next[j];
  long long t1 = clock64();
  sink[0] = j;
  cycles[0] = t1 - t0;
}

// Writes the chain: node order[i] points to node order[i+1] (and the last back to the first).
extern "C" __global__ void lat_build_chain(unsigned* next, const unsigned* order, long long n,
                                           unsigned stride_words) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) next[(long long)order[i] * stride_words] = order[(i + 1) % n] * stride_words;
}
// [/gpuarch:chase]

// ---------------------------------------------------------------------------------------------
// Host side. Kernels are addressed by index into this table.
// ---------------------------------------------------------------------------------------------

namespace {

struct KernelEntry {
  const char* name;
  const void* func;
};

const KernelEntry kKernels[] = {
    {"occ_copy", reinterpret_cast<const void*>(occ_copy)},
    {"occ_reduce_dyn", reinterpret_cast<const void*>(occ_reduce_dyn)},
    {"occ_transpose33", reinterpret_cast<const void*>(occ_transpose33)},
    {"occ_sgemm_8x8", reinterpret_cast<const void*>(occ_sgemm_8x8)},
    {"occ_sgemm_8x8_lb3", reinterpret_cast<const void*>(occ_sgemm_8x8_lb3)},
    {"occ_stage_dyn", reinterpret_cast<const void*>(occ_stage_dyn)},
};
constexpr int kNumKernels = sizeof(kKernels) / sizeof(kKernels[0]);

struct DeviceAttr {
  const char* name;
  cudaDeviceAttr attr;
};

const DeviceAttr kDeviceAttrs[] = {
    {"compute_capability_major", cudaDevAttrComputeCapabilityMajor},
    {"compute_capability_minor", cudaDevAttrComputeCapabilityMinor},
    {"multiprocessor_count", cudaDevAttrMultiProcessorCount},
    {"warp_size", cudaDevAttrWarpSize},
    {"max_threads_per_multiprocessor", cudaDevAttrMaxThreadsPerMultiProcessor},
    {"max_blocks_per_multiprocessor", cudaDevAttrMaxBlocksPerMultiprocessor},
    {"max_threads_per_block", cudaDevAttrMaxThreadsPerBlock},
    {"max_registers_per_multiprocessor", cudaDevAttrMaxRegistersPerMultiprocessor},
    {"max_registers_per_block", cudaDevAttrMaxRegistersPerBlock},
    {"max_shared_memory_per_multiprocessor", cudaDevAttrMaxSharedMemoryPerMultiprocessor},
    {"max_shared_memory_per_block", cudaDevAttrMaxSharedMemoryPerBlock},
    {"max_shared_memory_per_block_optin", cudaDevAttrMaxSharedMemoryPerBlockOptin},
    {"reserved_shared_memory_per_block", cudaDevAttrReservedSharedMemoryPerBlock},
    {"l2_cache_size", cudaDevAttrL2CacheSize},
    {"global_memory_bus_width", cudaDevAttrGlobalMemoryBusWidth},
};
constexpr int kNumDeviceAttrs = sizeof(kDeviceAttrs) / sizeof(kDeviceAttrs[0]);

bool valid_kernel(int k) { return k >= 0 && k < kNumKernels; }

// Sattolo's shuffle: a random permutation that is a single cycle, so the chase visits every node.
std::vector<unsigned> single_cycle_order(long long n, unsigned long long seed) {
  std::vector<unsigned> order(n);
  for (long long i = 0; i < n; ++i) order[i] = static_cast<unsigned>(i);
  unsigned long long state = seed | 1ull;
  for (long long i = n - 1; i > 0; --i) {
    state ^= state << 13;  // xorshift64
    state ^= state >> 7;
    state ^= state << 17;
    long long j = static_cast<long long>(state % static_cast<unsigned long long>(i));  // j < i
    unsigned t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  return order;
}

}  // namespace

extern "C" const char* probe_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

extern "C" int probe_num_kernels() { return kNumKernels; }

extern "C" const char* probe_kernel_name(int k) { return valid_kernel(k) ? kKernels[k].name : ""; }

extern "C" int probe_num_device_attributes() { return kNumDeviceAttrs; }

extern "C" const char* probe_device_attribute_name(int i) {
  return (i >= 0 && i < kNumDeviceAttrs) ? kDeviceAttrs[i].name : "";
}

extern "C" int probe_device_attribute(int i, int* value) {
  if (value == nullptr || i < 0 || i >= kNumDeviceAttrs) return cudaErrorInvalidValue;
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(value, kDeviceAttrs[i].attr, dev);
  return err;
}

// [gpuarch:probe-query]
// What the compiler gave the kernel (cudaFuncGetAttributes), in a fixed order:
// registers per thread, static shared memory, local memory per thread (spills), constant memory,
// max threads per block, max dynamic shared memory, preferred carveout, binary version.
extern "C" int probe_func_attributes(int k, long long* out) {
  if (out == nullptr || !valid_kernel(k)) return cudaErrorInvalidValue;
  cudaFuncAttributes a;
  cudaError_t err = cudaFuncGetAttributes(&a, kKernels[k].func);
  if (err != cudaSuccess) return err;
  out[0] = a.numRegs;
  out[1] = (long long)a.sharedSizeBytes;
  out[2] = (long long)a.localSizeBytes;
  out[3] = (long long)a.constSizeBytes;
  out[4] = a.maxThreadsPerBlock;
  out[5] = a.maxDynamicSharedSizeBytes;
  out[6] = a.preferredShmemCarveout;
  out[7] = a.binaryVersion;
  return cudaSuccess;
}

// Raise the kernel's dynamic shared memory limit (the opt-in above 48 KiB), or set its preferred
// carveout (percent of the maximum shared memory per SM; -1 restores the default).
extern "C" int probe_set_max_dynamic_smem(int k, int bytes) {
  if (!valid_kernel(k)) return cudaErrorInvalidValue;
  return cudaFuncSetAttribute(kKernels[k].func, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

extern "C" int probe_set_carveout(int k, int percent) {
  if (!valid_kernel(k)) return cudaErrorInvalidValue;
  return cudaFuncSetAttribute(kKernels[k].func, cudaFuncAttributePreferredSharedMemoryCarveout,
                              percent);
}

// The runtime's answer: how many blocks of `block` threads with `dyn` bytes of dynamic shared
// memory fit on one SM at once.
extern "C" int probe_max_active_blocks(int k, int block, long long dyn, int* blocks) {
  if (blocks == nullptr || !valid_kernel(k) || dyn < 0) return cudaErrorInvalidValue;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kKernels[k].func, block,
                                                       static_cast<size_t>(dyn));
}
// [/gpuarch:probe-query]

// Launch kernel k once, 1 block of `block` threads and `dyn` bytes of dynamic shared memory, on an
// empty problem (n = 0: every kernel returns at once). Returns the launch's error, then the
// synchronization's: a configuration with zero resident blocks fails here, before it runs.
extern "C" int probe_try_launch(int k, int block, long long dyn) {
  if (!valid_kernel(k) || block <= 0 || dyn < 0) return cudaErrorInvalidValue;
  float* buf = nullptr;
  cudaError_t err = cudaMalloc(&buf, 64);
  if (err != cudaSuccess) return err;
  size_t smem = static_cast<size_t>(dyn);
  switch (k) {
    case 0: occ_copy<<<1, block, smem>>>(reinterpret_cast<const float4*>(buf),
                                         reinterpret_cast<float4*>(buf) + 1, 0); break;
    case 1: occ_reduce_dyn<<<1, block, smem>>>(buf, buf + 1, 0); break;
    case 2: occ_transpose33<<<1, dim3(kTile, block / kTile), smem>>>(buf, buf + 1, 0, 0); break;
    case 3: occ_sgemm_8x8<<<1, block, smem>>>(buf, buf, buf + 1, 0, 0, 0); break;
    case 4: occ_sgemm_8x8_lb3<<<1, block, smem>>>(buf, buf, buf + 1, 0, 0, 0); break;
    default: occ_stage_dyn<<<1, block, smem>>>(buf, buf + 1, 0, 1); break;
  }
  err = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  cudaFree(buf);
  return err != cudaSuccess ? err : sync;
}

// [gpuarch:chase-host]
// mode 0: global memory, ld.ca; 1: global memory, ld.cg; 2: shared memory.
// `bytes` is the size of the chain's footprint, `stride_bytes` the distance between its nodes.
// A first launch of `steps` loads warms the caches and TLBs; a second launch continues the chain
// from where the first stopped and is timed: clock64() cycles inside the kernel and CUDA events
// around it, both divided by the number of loads. A chain that fits in a cache is walked around
// many times, so the timed launch hits that cache; a chain much longer than 2 x steps nodes never
// revisits a node, so every timed load misses every cache.
extern "C" int probe_chase(int mode, long long bytes, int stride_bytes, int steps,
                           unsigned long long seed, double* cycles_per_load, double* ns_per_load) {
  if (cycles_per_load == nullptr || ns_per_load == nullptr || steps <= 0 || stride_bytes < 4 ||
      stride_bytes % 4 != 0 || bytes < stride_bytes || mode < 0 || mode > 2)
    return cudaErrorInvalidValue;
  const long long n = bytes / stride_bytes;            // nodes in the chain
  const unsigned stride_words = stride_bytes / 4;
  if (n * stride_words > 0xffffffffll) return cudaErrorInvalidValue;  // 32-bit indices
  unsigned* sink = nullptr;
  long long* cycles = nullptr;
  unsigned* next = nullptr;
  unsigned* order = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t err = cudaMalloc(&sink, sizeof(unsigned));
  if (err == cudaSuccess) err = cudaMemset(sink, 0, sizeof(unsigned));  // the chase starts at node 0
  if (err == cudaSuccess) err = cudaMalloc(&cycles, sizeof(long long));
  if (err == cudaSuccess) err = cudaEventCreate(&start);
  if (err == cudaSuccess) err = cudaEventCreate(&stop);
  size_t smem = 0;
  if (err == cudaSuccess && mode < 2) {
    std::vector<unsigned> host = single_cycle_order(n, seed);
    err = cudaMalloc(&next, static_cast<size_t>(n) * stride_bytes);
    if (err == cudaSuccess) err = cudaMalloc(&order, static_cast<size_t>(n) * sizeof(unsigned));
    if (err == cudaSuccess)
      err = cudaMemcpy(order, host.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice);
    if (err == cudaSuccess) {
      lat_build_chain<<<static_cast<unsigned>((n + 255) / 256), 256>>>(next, order, n, stride_words);
      err = cudaGetLastError();
    }
  } else if (err == cudaSuccess) {
    smem = static_cast<size_t>(n) * stride_bytes;
    err = cudaFuncSetAttribute(lat_chase_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem));
  }
  for (int pass = 0; pass < 2 && err == cudaSuccess; ++pass) {  // pass 0 warms, pass 1 is timed
    err = cudaEventRecord(start);
    if (mode < 2) {
      lat_chase_global<<<1, 1>>>(next, steps, mode == 1, sink, cycles);
    } else {
      lat_chase_shared<<<1, 256, smem>>>(static_cast<int>(n * stride_words),
                                         static_cast<int>(stride_words), steps, sink, cycles);
    }
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaEventRecord(stop);
    if (err == cudaSuccess) err = cudaEventSynchronize(stop);
  }
  if (err == cudaSuccess) {
    float ms = 0.0f;
    long long c = 0;
    err = cudaEventElapsedTime(&ms, start, stop);
    if (err == cudaSuccess) err = cudaMemcpy(&c, cycles, sizeof(c), cudaMemcpyDeviceToHost);
    *cycles_per_load = static_cast<double>(c) / steps;
    *ns_per_load = 1e6 * ms / steps;
  }
  cudaFree(sink);
  cudaFree(cycles);
  cudaFree(next);
  cudaFree(order);
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  return err;
}
// [/gpuarch:chase-host]
