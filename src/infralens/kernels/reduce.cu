// Lab 04: the reduction ladder. Seven kernels that each sum n float32 values, every rung changing
// one idea of the rung before it, two single-kernel variants of the last rung, and the copy
// kernel that sets the ceiling they are measured against. Each kernel has an extern "C" launcher
// that validates its arguments, reads what it needs from the device, launches on the caller's
// stream and returns the cudaError_t of the launch (0 on success), so the Python side
// (infralens/tools/nvcc.py) can check every launch.
//
// Build (cuda_build.build("reduce") does it, and prints the exact command):
//   nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -lineinfo -Xptxas -v
//        -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80
//        -gencode arch=compute_90,code=compute_90 -o libreduce.so reduce.cu

#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kBlock = 256;  // threads per block, every rung: 8 warps, a power of two for the trees
constexpr int kWarp = 32;    // threads per warp (the shuffle masks below assume it)
constexpr int kUnroll = 4;   // rung 6: independent 16-byte loads in flight per thread
constexpr unsigned kFullMask = 0xffffffffu;  // all 32 lanes take part in a shuffle

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

// The largest grid.x this device accepts, read from the device rather than assumed.
cudaError_t max_grid_x(long long* out) {
  int dev = 0, value = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&value, cudaDevAttrMaxGridDimX, dev);
  *out = value;
  return err;
}

cudaError_t check_args(const void* x, const void* out, long long n) {
  if (x == nullptr || out == nullptr || n <= 0) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

// [reduce:rung0]
// Rung 0: one global atomicAdd per element. Correct, and as serial as a loop: every thread of the
// grid read-modify-writes the same 4-byte word, so the adds queue up at one L2 address.
extern "C" __global__ void reduce0_atomic(const float* __restrict__ x, float* out, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // one element per thread
  if (i < n) atomicAdd(out, x[i]);
}
// [/reduce:rung0]

// [reduce:publish]
// How a tree rung (1 to 5) hands over its block's sum. The ladder uses one atomicAdd per block
// into *out. With a partials array instead, block b stores its sum in partials[b] and nothing
// waits on one address: the launcher's "block sums" mode, which times the tree without the atomic.
__device__ __forceinline__ void publish(float block_total, float* out, float* partials) {
  if (partials != nullptr) partials[blockIdx.x] = block_total;  // uniform: the same for all blocks
  else atomicAdd(out, block_total);
}
// [/reduce:publish]

// [reduce:rung1]
// Rung 1: a tree in shared memory, interleaved addressing. Each block sums its kBlock elements in
// log2(kBlock) levels and issues ONE atomic, instead of kBlock of them.
extern "C" __global__ void reduce1_interleaved_divergent(const float* __restrict__ x, float* out,
                                                         float* partials, long long n) {
  __shared__ float s[kBlock];
  unsigned tid = threadIdx.x;
  long long i = (long long)blockIdx.x * kBlock + tid;
  s[tid] = (i < n) ? x[i] : 0.0f;  // zeros past the end: the tree below always sees a full block
  __syncthreads();  // protects: every slot of s is written before any thread reads a neighbour's
  for (unsigned stride = 1; stride < kBlock; stride *= 2) {
    // Only threads whose id is a multiple of 2*stride add. kBlock is a compile-time constant, so
    // the loop unrolls, each % becomes an AND mask and ptxas predicates the add (no branch): every
    // warp issues every level, most of its lanes predicated off. (Harris's kernel 1 looped to the
    // runtime blockDim.x, where % by a runtime value is a real remainder.)
    if (tid % (2 * stride) == 0) s[tid] += s[tid + stride];
    __syncthreads();  // protects: this level's sums are complete before the next level reads them
  }
  if (tid == 0) publish(s[0], out, partials);  // in the ladder: one atomic per block
}
// [/reduce:rung1]

// [reduce:rung2]
// Rung 2: the same tree with the work packed onto the lowest thread ids (warp-uniform conditions).
extern "C" __global__ void reduce2_interleaved_strided(const float* __restrict__ x, float* out,
                                                       float* partials, long long n) {
  __shared__ float s[kBlock];
  unsigned tid = threadIdx.x;
  long long i = (long long)blockIdx.x * kBlock + tid;
  s[tid] = (i < n) ? x[i] : 0.0f;
  __syncthreads();  // protects: the block's elements are all in s before the first level
  for (unsigned stride = 1; stride < kBlock; stride *= 2) {
    // Thread t now works on slot 2*stride*t: the active threads are the lowest ids, so at each
    // level most warps have no lane on. ptxas still predicates the add, so every warp issues it,
    // but a warp with no lane on sends no request to shared memory. The price: lanes k apart touch
    // words 2*stride*k apart, in the same bank when 2*stride*k is a multiple of 32: conflicts.
    unsigned idx = 2 * stride * tid;
    if (idx < kBlock) s[idx] += s[idx + stride];
    __syncthreads();  // protects: this level's sums are complete before the next level reads them
  }
  if (tid == 0) publish(s[0], out, partials);
}
// [/reduce:rung2]

// [reduce:rung3]
// Rung 3: sequential addressing. Fold the upper half of the live slots onto the lower half, level
// after level, until `live` sums are left in s[0 .. live - 1] (1: the block's total in s[0]).
// Rungs 4 and 5 keep this tree.
__device__ __forceinline__ void fold_halves(float* s, unsigned tid, unsigned live) {
  for (unsigned stride = kBlock / 2; stride >= live; stride >>= 1) {
    // Thread t adds slot t+stride into slot t: consecutive lanes read consecutive words, one per
    // bank, so no conflicts; the active threads stay contiguous, as in rung 2.
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();  // protects: this level's sums are complete before the next level reads them
  }
}

extern "C" __global__ void reduce3_sequential(const float* __restrict__ x, float* out, float* partials,
                                              long long n) {
  __shared__ float s[kBlock];
  unsigned tid = threadIdx.x;
  long long i = (long long)blockIdx.x * kBlock + tid;
  s[tid] = (i < n) ? x[i] : 0.0f;
  __syncthreads();  // protects: the block's elements are all in s before the first level
  fold_halves(s, tid, 1);
  if (tid == 0) publish(s[0], out, partials);
}
// [/reduce:rung3]

// [reduce:rung4]
// Rung 4: first add during the global load. Half the threads of rung 3 added nothing after their
// load; now each thread adds two elements, kBlock apart, while loading, so a block covers
// 2*kBlock elements and the grid needs half as many blocks for the same n.
extern "C" __global__ void reduce4_first_add(const float* __restrict__ x, float* out, float* partials,
                                             long long n) {
  __shared__ float s[kBlock];
  unsigned tid = threadIdx.x;
  long long i = (long long)blockIdx.x * (2 * kBlock) + tid;
  float v = (i < n) ? x[i] : 0.0f;
  if (i + kBlock < n) v += x[i + kBlock];  // both loads coalesced: each warp reads 128 bytes
  s[tid] = v;
  __syncthreads();  // protects: the block's pair sums are all in s before the first level
  fold_halves(s, tid, 1);  // rung 3's tree, over half as many blocks
  if (tid == 0) publish(s[0], out, partials);
}
// [/reduce:rung4]

// [reduce:rung5]
// Rung 5: the last warp reduces in registers with shuffles. Once 64 partial sums remain, one warp
// can finish without shared memory or block-wide barriers. (The classic version relied on
// "warp-synchronous" volatile shared memory; since Volta the lanes of a warp may run
// independently, so the exchange must go through the *_sync intrinsics.)
extern "C" __global__ void reduce5_warp_shuffle(const float* __restrict__ x, float* out,
                                                float* partials, long long n) {
  __shared__ float s[kBlock];
  unsigned tid = threadIdx.x;
  long long i = (long long)blockIdx.x * (2 * kBlock) + tid;
  float v = (i < n) ? x[i] : 0.0f;
  if (i + kBlock < n) v += x[i + kBlock];
  s[tid] = v;
  __syncthreads();  // protects: the block's pair sums are all in s before the first level
  fold_halves(s, tid, 2 * kWarp);  // rung 4's tree, stopped at 64 live values
  if (tid < kWarp) {
    v = s[tid] + s[tid + kWarp];  // 64 values -> 32, one per lane of warp 0
    for (int offset = kWarp / 2; offset > 0; offset >>= 1)
      v += __shfl_down_sync(kFullMask, v, offset);  // lane t adds lane t+offset's value
    if (tid == 0) publish(v, out, partials);
  }
}
// [/reduce:rung5]

// [reduce:block-sum]
// Sum of v over a warp, by shuffles; the result is valid in lane 0.
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1)
    v += __shfl_down_sync(kFullMask, v, offset);
  return v;
}

// Sum of v over a block of kBlock threads; the result is valid in thread 0. The order of the adds
// depends only on the thread ids, never on timing: the same inputs give the same bits.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[kBlock / kWarp];
  unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();  // protects: every warp's sum is in shared memory before warp 0 reads them
  if (warp == 0) v = warp_sum(lane < kBlock / kWarp ? warp_sums[lane] : 0.0f);
  return v;
}
// [/reduce:block-sum]

// [reduce:rung6]
// Rung 6: a fixed grid that strides over the whole input with 16-byte loads, then a second pass.
// The grid is sized to fill the GPU once (SMs x resident blocks, read from the device), so each
// thread sums many elements in registers and the block-level tree runs once per block, not once
// per 512 elements. partials[b] receives block b's sum; reduce6_finalize adds them in a fixed
// order, so the result is deterministic, unlike the atomics of rungs 0 to 5.
//
// The loop each thread runs is a function, because the single-kernel variants below
// ([reduce:grid-atomic], [reduce:grid-last-block]) run the same loop and differ only in how the
// block sums are combined.
__device__ __forceinline__ float grid_stride_thread_sum(const float* __restrict__ x, long long n) {
  const float4* x4 = reinterpret_cast<const float4*>(x);  // the launcher checked 16-byte alignment
  long long n4 = n / 4;                                     // whole float4 vectors
  long long stride = (long long)gridDim.x * kBlock;         // threads in the grid
  long long i = (long long)blockIdx.x * kBlock + threadIdx.x;
  float acc[kUnroll] = {};
  // kUnroll independent 16-byte loads are issued before the first add uses any of them, so each
  // thread keeps 64 bytes in flight: enough outstanding requests to cover the DRAM latency.
  for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = x4[i + u * stride];  // coalesced: 512 B per warp
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc[u] += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
  for (; i < n4; i += stride) {  // the last vectors, fewer than kUnroll per thread
    float4 v = x4[i];
    acc[0] += (v.x + v.y) + (v.z + v.w);
  }
  long long tail = (long long)blockIdx.x * kBlock + threadIdx.x;  // n % 4 scalars after the vectors
  if (tail < n - 4 * n4) acc[0] += x[4 * n4 + tail];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

extern "C" __global__ void reduce6_grid_stride(const float* __restrict__ x, float* partials,
                                               long long n) {
  float sum = block_sum(grid_stride_thread_sum(x, n));
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// The second pass: one block adds the m partial sums. Thread t takes partials t, t+kBlock, ... in
// that order, then the block tree: a fixed order, hence the same bits on every run. `load(j)`
// reads partial j (the single-kernel variant below reads through L2).
template <typename Load>
__device__ __forceinline__ float sum_partials(int m, Load load) {
  float v = 0.0f;
  for (int j = threadIdx.x; j < m; j += kBlock) v += load(j);
  return block_sum(v);
}

extern "C" __global__ void reduce6_finalize(const float* __restrict__ partials, float* out, int m) {
  float v = sum_partials(m, [=](int j) { return partials[j]; });
  if (threadIdx.x == 0) *out = v;
}
// [/reduce:rung6]

// [reduce:grid-atomic]
// Rung 6's grid and loop in ONE kernel: each block adds its sum to *out with one atomicAdd. The
// grid is one wave of blocks (about a thousand on an H100), so that many atomics reach the one
// address, where rungs 1 to 5 issue one per 256 or 512 elements. The order in which the blocks
// finish, and so the rounding of the sum, can change from run to run: not deterministic.
extern "C" __global__ void reduce_grid_atomic(const float* __restrict__ x, float* out, long long n) {
  float sum = block_sum(grid_stride_thread_sum(x, n));
  if (threadIdx.x == 0) atomicAdd(out, sum);
}
// [/reduce:grid-atomic]

// [reduce:grid-last-block]
// Rung 6's grid and loop in ONE kernel, deterministic: each block stores its sum in partials[b]
// (as rung 6 does), makes that store visible to the whole GPU (__threadfence), then takes a ticket
// from a counter. The block that draws the last ticket knows every other partial is written and
// adds them all in the fixed order of reduce6_finalize. The pattern of the CUDA Programming
// Guide's example for memory fences; the launcher zeroes the counter before each launch.
// __launch_bounds__ asks ptxas to fit 2048 / kBlock = 8 blocks per SM (at most 32 registers per
// thread), the residency rung 6 reaches on sm_90: there the two grids, and with them the order of
// the additions, are the same.
extern "C" __global__ void __launch_bounds__(kBlock, 2048 / kBlock)
reduce_grid_last_block(const float* __restrict__ x, float* out, float* partials, unsigned int* counter,
                       long long n) {
  __shared__ bool last;
  float sum = block_sum(grid_stride_thread_sum(x, n));
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    __threadfence();  // the partial is visible to every block before the ticket is taken
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();  // protects: every thread of the block sees `last`
  if (last) {  // rung 6's second pass, in the same order; __ldcg reads the partials from L2
    float v = sum_partials((int)gridDim.x, [=](int j) { return __ldcg(partials + j); });
    if (threadIdx.x == 0) *out = v;
  }
}
// [/reduce:grid-last-block]

// [reduce:copy]
// The ceiling: a device-to-device copy. Each thread moves one 16-byte vector and the grid covers
// the whole input, the simplest copy there is; the threads past the last vector copy the n % 4
// scalars of the tail. It moves 2 bytes for every byte a reduction reads.
extern "C" __global__ void copy_vec4(const float* __restrict__ x, float* __restrict__ y,
                                     long long n) {
  long long i = (long long)blockIdx.x * kBlock + threadIdx.x;
  long long n4 = n / 4;
  if (i < n4)
    reinterpret_cast<float4*>(y)[i] = reinterpret_cast<const float4*>(x)[i];  // 512 B per warp
  else if (i - n4 < n - 4 * n4)
    y[4 * n4 + (i - n4)] = x[4 * n4 + (i - n4)];
}
// [/reduce:copy]

// ---------------------------------------------------------------------------------------------
// Launchers. Each returns a cudaError_t as int: argument errors before anything touches the GPU,
// then the result of cudaGetLastError() right after the launch, which reports a bad launch
// configuration or a missing device. Faults inside a kernel surface at the next synchronization.
// ---------------------------------------------------------------------------------------------

extern "C" const char* infralens_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

extern "C" const char* infralens_error_name(int code) {
  return cudaGetErrorName(static_cast<cudaError_t>(code));
}

extern "C" int reduce_block_size() { return kBlock; }

// [reduce:grid-size]
// Blocks of the fixed grid of rung 6 and the copy: every SM filled with as many blocks as fit at
// once. Both numbers come from the device, so the same code sizes itself on an A100 or an H100.
template <typename Kernel>
static cudaError_t full_wave(Kernel kernel, int* blocks) {
  if (blocks == nullptr) return cudaErrorInvalidValue;
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err == cudaSuccess)
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, 0);
  *blocks = sms * per_sm;
  return err;
}

extern "C" int reduce6_grid_size(int* blocks) { return full_wave(reduce6_grid_stride, blocks); }
// [/reduce:grid-size]

// [reduce:launch]
// Rungs 0 to 5 accumulate into *out with atomics, so the launcher zeroes it first, on the same
// stream, and sizes the grid from n (elements per block: kBlock, or 2*kBlock from rung 4 on).
using TreeKernel = void (*)(const float*, float*, float*, long long);

static int launch_tree(TreeKernel kernel, int per_block, const float* x, float* out,
                       float* partials, long long num_partials, long long n, cudaStream_t stream) {
  cudaError_t err = check_args(x, partials != nullptr ? partials : out, n);
  if (err != cudaSuccess) return err;
  long long blocks = ceil_div(n, per_block), limit = 0;
  if ((err = max_grid_x(&limit)) != cudaSuccess) return err;
  if (blocks > limit) return cudaErrorInvalidConfiguration;  // n too large for one launch
  if (partials != nullptr && num_partials < blocks) return cudaErrorInvalidValue;
  if (partials == nullptr && (err = cudaMemsetAsync(out, 0, sizeof(float), stream)) != cudaSuccess)
    return err;
  kernel<<<(unsigned)blocks, kBlock, 0, stream>>>(x, out, partials, n);
  return cudaGetLastError();
}
// [/reduce:launch]

// Rung 0 has no tree: the same checks, one thread per element.
extern "C" int launch_reduce0_atomic(const float* x, float* out, long long n, cudaStream_t s) {
  cudaError_t err = check_args(x, out, n);
  if (err != cudaSuccess) return err;
  long long blocks = ceil_div(n, kBlock), limit = 0;
  if ((err = max_grid_x(&limit)) != cudaSuccess) return err;
  if (blocks > limit) return cudaErrorInvalidConfiguration;
  if ((err = cudaMemsetAsync(out, 0, sizeof(float), s)) != cudaSuccess) return err;
  reduce0_atomic<<<(unsigned)blocks, kBlock, 0, s>>>(x, out, n);
  return cudaGetLastError();
}

// The tree rungs by number, with the elements each block covers.
static TreeKernel tree_kernel(int rung, int* per_block) {
  *per_block = rung >= 4 ? 2 * kBlock : kBlock;
  switch (rung) {
    case 1: return reduce1_interleaved_divergent;
    case 2: return reduce2_interleaved_strided;
    case 3: return reduce3_sequential;
    case 4: return reduce4_first_add;
    case 5: return reduce5_warp_shuffle;
    default: return nullptr;
  }
}

static int launch_rung(int rung, const float* x, float* out, long long n, cudaStream_t s) {
  int per_block = 0;
  TreeKernel kernel = tree_kernel(rung, &per_block);
  return launch_tree(kernel, per_block, x, out, nullptr, 0, n, s);
}

extern "C" int launch_reduce1_interleaved_divergent(const float* x, float* out, long long n,
                                                    cudaStream_t s) {
  return launch_rung(1, x, out, n, s);
}
extern "C" int launch_reduce2_interleaved_strided(const float* x, float* out, long long n,
                                                  cudaStream_t s) {
  return launch_rung(2, x, out, n, s);
}
extern "C" int launch_reduce3_sequential(const float* x, float* out, long long n, cudaStream_t s) {
  return launch_rung(3, x, out, n, s);
}
extern "C" int launch_reduce4_first_add(const float* x, float* out, long long n, cudaStream_t s) {
  return launch_rung(4, x, out, n, s);
}
extern "C" int launch_reduce5_warp_shuffle(const float* x, float* out, long long n,
                                           cudaStream_t s) {
  return launch_rung(5, x, out, n, s);
}

// [reduce:block-sums]
// The diagnostic mode of rungs 1 to 5: the same kernel, but each block stores its sum in
// partials[b] instead of adding it to *out. No atomic, no second pass: what the tree alone costs.
extern "C" long long reduce_tree_blocks(int rung, long long n) {
  int per_block = 0;
  if (tree_kernel(rung, &per_block) == nullptr || n <= 0) return -1;
  return ceil_div(n, per_block);
}

extern "C" int launch_reduce_block_sums(int rung, const float* x, float* partials,
                                        long long num_partials, long long n, cudaStream_t s) {
  int per_block = 0;
  TreeKernel kernel = tree_kernel(rung, &per_block);
  if (kernel == nullptr || partials == nullptr) return cudaErrorInvalidValue;
  return launch_tree(kernel, per_block, x, nullptr, partials, num_partials, n, s);
}
// [/reduce:block-sums]

// [reduce:launch6]
// Rung 6 needs a workspace of one float per block; the caller allocates it (reduce6_grid_size
// says how many) so that it can poison it in tests. Two launches on one stream: the second pass
// starts only after the first has written every partial sum.
extern "C" int launch_reduce6_grid_stride(const float* x, float* out, float* partials,
                                          int num_partials, long long n, cudaStream_t stream) {
  cudaError_t err = check_args(x, out, n);
  if (err != cudaSuccess) return err;
  if (partials == nullptr || reinterpret_cast<uintptr_t>(x) % 16 != 0) return cudaErrorInvalidValue;
  int blocks = 0;
  if ((err = static_cast<cudaError_t>(reduce6_grid_size(&blocks))) != cudaSuccess) return err;
  if (blocks <= 0 || num_partials < blocks) return cudaErrorInvalidValue;
  reduce6_grid_stride<<<blocks, kBlock, 0, stream>>>(x, partials, n);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  reduce6_finalize<<<1, kBlock, 0, stream>>>(partials, out, blocks);
  return cudaGetLastError();
}
// [/reduce:launch6]

// [reduce:launch-single]
// The single-kernel variants of rung 6: variant 0 is reduce_grid_atomic (zeroes *out first, as
// rungs 0 to 5 do), variant 1 reduce_grid_last_block (zeroes the ticket counter first and needs
// one partial per block). Each sizes its own grid as one full wave.
extern "C" int reduce_variant_grid_size(int variant, int* blocks) {
  if (variant == 0) return full_wave(reduce_grid_atomic, blocks);
  if (variant == 1) return full_wave(reduce_grid_last_block, blocks);
  return cudaErrorInvalidValue;
}

extern "C" int launch_reduce_variant(int variant, const float* x, float* out, float* partials,
                                     int num_partials, unsigned int* counter, long long n,
                                     cudaStream_t stream) {
  cudaError_t err = check_args(x, out, n);
  if (err != cudaSuccess) return err;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) return cudaErrorInvalidValue;  // float4 loads
  int blocks = 0;
  if ((err = static_cast<cudaError_t>(reduce_variant_grid_size(variant, &blocks))) != cudaSuccess)
    return err;
  if (blocks <= 0) return cudaErrorInvalidConfiguration;
  if (variant == 0) {
    if ((err = cudaMemsetAsync(out, 0, sizeof(float), stream)) != cudaSuccess) return err;
    reduce_grid_atomic<<<blocks, kBlock, 0, stream>>>(x, out, n);
  } else {
    if (partials == nullptr || counter == nullptr || num_partials < blocks) return cudaErrorInvalidValue;
    if ((err = cudaMemsetAsync(counter, 0, sizeof(unsigned int), stream)) != cudaSuccess) return err;
    reduce_grid_last_block<<<blocks, kBlock, 0, stream>>>(x, out, partials, counter, n);
  }
  return cudaGetLastError();
}
// [/reduce:launch-single]

extern "C" int launch_copy_vec4(const float* x, float* y, long long n, cudaStream_t stream) {
  cudaError_t err = check_args(x, y, n);
  if (err != cudaSuccess) return err;
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0)
    return cudaErrorInvalidValue;
  long long blocks = ceil_div(n / 4 + n % 4, kBlock), limit = 0;  // one thread per vector or scalar
  if ((err = max_grid_x(&limit)) != cudaSuccess) return err;
  if (blocks > limit) return cudaErrorInvalidConfiguration;
  copy_vec4<<<(unsigned)blocks, kBlock, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
