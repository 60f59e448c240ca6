// Lab 05: matrix transpose and shared-memory bank conflicts. out (cols x rows) = in (rows x cols)
// transposed, float32, both row-major. A copy kernel sets the ceiling; the transposes climb from
// a naive kernel to a padded shared-memory tile, one change per kernel. One extern "C" launcher
// takes a kernel by number, validates its arguments, checks the grid against the device's limits
// and returns the cudaError_t of the launch (0 on success).
//
// Shared memory (compute capability 5.0 and later, so sm_80 and sm_90): 32 banks, each 4 bytes
// wide; 32-bit word w lives in bank w % 32. A warp's access takes one pass (a "wavefront") per
// distinct word that any single bank must deliver: 32 lanes reading 32 words of one bank take 32.

#include <cuda_runtime.h>

namespace {

constexpr int kTile = 32;  // tile edge: one warp spans one tile row, and there are 32 banks
constexpr int kRows = 8;   // thread rows of the 32x8 blocks: each thread moves kTile/kRows rows
constexpr int kRows16 = 16;        // thread rows of the 32x16 blocks: two rows each
constexpr int kTallRows = 4 * kTile;  // rows of `in` in the tall tile of 32x32 threads, four each

// The grid must fit the device's limits (grid.y is far smaller than grid.x), read from the device.
cudaError_t check_grid(dim3 grid) {
  int dev = 0, max_x = 0, max_y = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&max_x, cudaDevAttrMaxGridDimX, dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&max_y, cudaDevAttrMaxGridDimY, dev);
  if (err != cudaSuccess) return err;
  if (grid.x > (unsigned)max_x || grid.y > (unsigned)max_y) return cudaErrorInvalidConfiguration;
  return cudaSuccess;
}

}  // namespace

// [transpose:copy]
// The ceiling: the same tiles, read and written row by row. Block (32, 8) covers a 32x32 tile;
// thread (tx, ty) moves rows ty, ty+8, ty+16, ty+24 of it, column tx. Every warp reads and writes
// 128 contiguous bytes: coalesced on both sides.
extern "C" __global__ void copy_tile(const float* __restrict__ in, float* __restrict__ out,
                                     int rows, int cols) {
  int c = blockIdx.x * kTile + threadIdx.x;  // column in the matrix
  int r = blockIdx.y * kTile + threadIdx.y;  // first row this thread moves
  for (int j = 0; j < kTile; j += kRows)
    if (r + j < rows && c < cols) out[(size_t)(r + j) * cols + c] = in[(size_t)(r + j) * cols + c];
}
// [/transpose:copy]

// [transpose:naive]
// Naive: one element per thread, block (32, 32). Reads are coalesced (a warp reads one row
// segment), but the warp writes one column segment of out: 32 addresses `rows` floats apart,
// each in its own 32-byte sector, so every write instruction moves 32 sectors for 128 useful bytes.
extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out,
                                           int rows, int cols) {
  int c = blockIdx.x * kTile + threadIdx.x;
  int r = blockIdx.y * kTile + threadIdx.y;
  if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}
// [/transpose:naive]

// [transpose:tile32]
// Shared-memory tile: read a 32x32 tile row by row (coalesced), then write the transposed tile
// row by row (coalesced) by reading the tile column by column. The column read is the problem:
// tile[tx][ty] for tx = 0..31 are words ty, ty+32, ty+64, ...: all in bank ty. 32-way conflict.
extern "C" __global__ void transpose_tile32(const float* __restrict__ in, float* __restrict__ out,
                                            int rows, int cols) {
  __shared__ float tile[kTile][kTile];
  int c = blockIdx.x * kTile + threadIdx.x;
  int r = blockIdx.y * kTile + threadIdx.y;
  if (r < rows && c < cols) tile[threadIdx.y][threadIdx.x] = in[(size_t)r * cols + c];
  __syncthreads();  // protects: the whole tile is in shared memory before any column is read
  // Out's tile is (blockIdx.x, blockIdx.y) swapped: its row is in's column and vice versa.
  int oc = blockIdx.y * kTile + threadIdx.x;  // column of out = row of in
  int orow = blockIdx.x * kTile + threadIdx.y;  // row of out = column of in
  if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[threadIdx.x][threadIdx.y];
}
// [/transpose:tile32]

// [transpose:tile33]
// Padded tile: one extra column. Row k now starts at word 33k, so the column read touches words
// ty + 33*tx, whose banks (ty + tx) % 32 are all different: conflict-free. The row write is
// still conflict-free. Cost: 32 x 4 = 128 bytes of shared memory per tile.
extern "C" __global__ void transpose_tile33(const float* __restrict__ in, float* __restrict__ out,
                                            int rows, int cols) {
  __shared__ float tile[kTile][kTile + 1];  // the only change from transpose_tile32
  int c = blockIdx.x * kTile + threadIdx.x;
  int r = blockIdx.y * kTile + threadIdx.y;
  if (r < rows && c < cols) tile[threadIdx.y][threadIdx.x] = in[(size_t)r * cols + c];
  __syncthreads();  // protects: the whole tile is in shared memory before any column is read
  int oc = blockIdx.y * kTile + threadIdx.x;
  int orow = blockIdx.x * kTile + threadIdx.y;
  if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[threadIdx.x][threadIdx.y];
}
// [/transpose:tile33]

// [transpose:tile33-rows]
// Padded tile, 32x8 threads: each thread moves kTile/kRows = 4 elements and issues its four
// independent global loads before the barrier, where a thread of transpose_tile33 has one to
// issue before it waits. With both kernels near full occupancy, that is about four times the
// bytes in flight per SM to cover the memory latency: the difference Lab 05 measures.
extern "C" __global__ void transpose_tile33_rows(const float* __restrict__ in,
                                                 float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTile][kTile + 1];
  int c = blockIdx.x * kTile + threadIdx.x;
  int r = blockIdx.y * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows)
    if (r + j < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(r + j) * cols + c];
  __syncthreads();  // protects: all four row groups are in the tile before any column is read
  int oc = blockIdx.y * kTile + threadIdx.x;
  int orow = blockIdx.x * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows)
    if (orow + j < cols && oc < rows)
      out[(size_t)(orow + j) * rows + oc] = tile[threadIdx.x][threadIdx.y + j];
}
// [/transpose:tile33-rows]

// [transpose:swizzle]
// Swizzled tile, 32x8 threads: no padding. Element (i, j) of the tile is stored at column j ^ i
// of row i. A row write (fixed i, j = 0..31) hits columns j ^ i, a permutation of 0..31; a column
// read (fixed j, i = 0..31) hits word 32*i + (j ^ i), whose banks j ^ i are again all different.
// Every row stays 128-byte aligned and the tile keeps its 4096 bytes. (The XOR moves
// 4-byte words, so a row's 16-byte chunks hold their four elements in permuted order: this layout
// is for scalar accesses. TMA's swizzle modes permute whole 16-byte chunks instead.)
extern "C" __global__ void transpose_swizzle(const float* __restrict__ in, float* __restrict__ out,
                                             int rows, int cols) {
  __shared__ float tile[kTile][kTile];
  int c = blockIdx.x * kTile + threadIdx.x;
  int r = blockIdx.y * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows) {
    int i = threadIdx.y + j;  // tile row
    if (r + j < rows && c < cols) tile[i][threadIdx.x ^ i] = in[(size_t)(r + j) * cols + c];
  }
  __syncthreads();  // protects: all four row groups are in the tile before any column is read
  int oc = blockIdx.y * kTile + threadIdx.x;
  int orow = blockIdx.x * kTile + threadIdx.y;
  for (int j = 0; j < kTile; j += kRows) {
    int jj = threadIdx.y + j;  // tile column being read, i = threadIdx.x
    if (orow + j < cols && oc < rows) out[(size_t)(orow + j) * rows + oc] = tile[threadIdx.x][jj ^ threadIdx.x];
  }
}
// [/transpose:swizzle]

// [transpose:block-shapes]
// Two more shapes of the padded tile, to test why 32x8 threads beat 32x32 (Lab 05). Between them
// and the two above, each factor changes alone:
//   transpose_tile33       32x32 threads, 1 load each,  1024-thread blocks (2 per SM at most)
//   transpose_tile33_x16   32x16 threads, 2 loads each,  512-thread blocks
//   transpose_tile33_rows  32x8 threads,  4 loads each,  256-thread blocks
//   transpose_tile33_tall  32x32 threads, 4 loads each, 1024-thread blocks: a 128x32 tile
// If loads in flight (and the index arithmetic shared by a thread's elements) explain the gap,
// _tall runs like _rows; if 1024-thread blocks idling at their barrier explain it, _tall runs
// like transpose_tile33.
// Both are one padded-tile transpose written for any block shape, transpose_padded: a tile of
// kTileRows rows of `in` by kTile columns, moved by kTile x kThreadRows threads that each load
// kTileRows / kThreadRows elements (rows ty, ty + kThreadRows, ...) before the barrier. Out's tile
// is kTile rows by kTileRows columns: thread (tx, ty) writes rows ty, ty + kThreadRows, ... of it
// and, in a tile taller than kTile, columns tx, tx + kTile, ... of each row, every element a column
// of the shared tile, read conflict-free as in transpose_tile33.
template <int kThreadRows, int kTileRows>
__device__ __forceinline__ void transpose_padded(const float* __restrict__ in,
                                                 float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTileRows][kTile + 1];
  int c = blockIdx.x * kTile + threadIdx.x;
  int r = blockIdx.y * kTileRows + threadIdx.y;
  for (int j = 0; j < kTileRows; j += kThreadRows)
    if (r + j < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(r + j) * cols + c];
  __syncthreads();  // protects: every row group is in the tile before any column is read
  int oc = blockIdx.y * kTileRows + threadIdx.x;  // column of out = row of in
  int orow = blockIdx.x * kTile + threadIdx.y;    // row of out = column of in
  for (int i = 0; i < kTile; i += kThreadRows)  // rows of out's tile: one each for 32x32 threads
    for (int j = 0; j < kTileRows; j += kTile)  // column groups: one unless the tile is tall
      if (orow + i < cols && oc + j < rows)
        out[(size_t)(orow + i) * rows + oc + j] = tile[threadIdx.x + j][threadIdx.y + i];
}

// 32x16 threads, a 32x32 tile: two elements each.
extern "C" __global__ void transpose_tile33_x16(const float* __restrict__ in,
                                                float* __restrict__ out, int rows, int cols) {
  transpose_padded<kRows16, kTile>(in, out, rows, cols);
}

// A tall tile: 4 x 32 = 128 rows of in by 32 columns, moved by 32x32 threads with four loads
// each, rows ty, ty+32, ty+64, ty+96; out's tile is 32 rows by 128 columns, and thread (tx, ty)
// writes row ty of it, columns tx, tx+32, tx+64, tx+96. 16.5 KB of shared memory per block.
extern "C" __global__ void transpose_tile33_tall(const float* __restrict__ in,
                                                 float* __restrict__ out, int rows, int cols) {
  transpose_padded<kTile, kTallRows>(in, out, rows, cols);
}
// [/transpose:block-shapes]

// ---------------------------------------------------------------------------------------------
// The launcher: argument checks, grid from the shape, grid checked against the device, launch on
// the caller's stream, cudaGetLastError() returned.
// ---------------------------------------------------------------------------------------------

extern "C" const char* infralens_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

extern "C" const char* infralens_error_name(int code) {
  return cudaGetErrorName(static_cast<cudaError_t>(code));
}

extern "C" int transpose_tile_size() { return kTile; }

// [transpose:launch]
static int launch(void (*kernel)(const float*, float*, int, int), int thread_rows, int tile_rows,
                  const float* in, float* out, int rows, int cols, cudaStream_t stream) {
  if (in == nullptr || out == nullptr || rows <= 0 || cols <= 0) return cudaErrorInvalidValue;
  dim3 block(kTile, thread_rows);  // 32 x 32 (one element per thread) or 32 x 8 (four each)
  dim3 grid((cols + kTile - 1) / kTile, (rows + tile_rows - 1) / tile_rows);  // one block per tile
  cudaError_t err = check_grid(grid);
  if (err != cudaSuccess) return err;
  kernel<<<grid, block, 0, stream>>>(in, out, rows, cols);
  return cudaGetLastError();
}
// [/transpose:launch]

// The kernels a caller launches by number: their order in this file (TRANSPOSE_KERNELS, then
// BLOCK_SHAPE_KERNELS, in transpose.py), each with the thread rows of its blocks and the rows of
// `in` one block covers (its tile: 32 x 32, or 128 x 32 for the tall tile).
struct TransposeKernel {
  void (*kernel)(const float*, float*, int, int);
  int thread_rows;
  int tile_rows;
};
constexpr TransposeKernel kKernels[] = {
    {copy_tile, kRows, kTile},         {transpose_naive, kTile, kTile},
    {transpose_tile32, kTile, kTile},  {transpose_tile33, kTile, kTile},
    {transpose_tile33_rows, kRows, kTile}, {transpose_swizzle, kRows, kTile},
    {transpose_tile33_x16, kRows16, kTile}, {transpose_tile33_tall, kTile, kTallRows},
};
constexpr int kNumKernels = sizeof(kKernels) / sizeof(kKernels[0]);

extern "C" int transpose_num_kernels() { return kNumKernels; }

extern "C" int launch_transpose(int k, const float* in, float* out, int rows, int cols,
                                cudaStream_t stream) {
  if (k < 0 || k >= kNumKernels) return cudaErrorInvalidValue;
  return launch(kKernels[k].kernel, kKernels[k].thread_rows, kKernels[k].tile_rows, in, out, rows,
                cols, stream);
}
