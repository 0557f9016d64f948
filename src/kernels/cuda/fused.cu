// fused.cu — GEMM epilogues fused with the glue that follows each projection
// of a layer (kernels/cuda_ops.h): the sum of the K-sliced GEMM's partial
// slabs, the bias, then the residual add, SwiGLU, or the q/k/v split with
// RoPE and the K/V write. Each computes every value with exactly the
// operations, in exactly the order, of the unfused sequence
// (gemm_bf16w_sliced's slab sum, add_bias, add_inplace / swiglu_rows /
// split_qkv + rope + kv_write), so the bits are the same; only the launches
// and the round trips through memory go. The residual add can also carry the
// RMSNorm that follows it (residual_add_rmsnorm_partials: add_inplace then
// rmsnorm). Compiled with --fmad=false.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/bf16_bits.cuh"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/launch.cuh"
#include "cuda/qkv_values.cuh"
#include "cuda/rms_row.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHeadDim = 512;

// Calls of up to this many rows (decode, verify and batched decode steps) take
// the latency-minded variants here: the batched slab loads and the staged
// residual norm. Larger calls (prefill chunks) keep the throughput-minded ones.
constexpr int64_t kFewRows = 64;

template <int Batch>
__global__ void residual_add_kernel(const float* slabs, int slices, int64_t rows, int64_t n,
                                    const float* __restrict__ bias, float* x) {
  pdl_enter();
  const int64_t count = rows * n, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    x[i] = x[i] + partial_value<Batch>(slabs, slices, count, i, bias, i % n);
}

// One block of kResidualNormThreads per row, three phases (row r only by
// block r):
//   1. x[r][i] += value(r, i), residual_add_kernel's arithmetic, every element
//      independent, so all the block's threads share them and each queues its
//      loads (4 elements × every slab) before it stores;
//   2. after a barrier (the block's global writes are visible to the block),
//      threads 0..kRmsThreads-1 sum x[i]² over i = t, t + kRmsThreads, … and
//      reduce with rms_inverse: rmsnorm_kernel's order exactly;
//   3. h[r][i] = (x[i] · inv) · weight[i], rmsnorm's formula, element-wise.
// slabs and h may be one buffer (one slice: the product sits in h): every
// slab read is in phase 1, every h write in phase 3, barriers between.
constexpr int kResidualNormThreads = 1024;
constexpr int kResidualNormBatch = 4;  // elements per thread whose loads are queued together

__global__ void __launch_bounds__(kResidualNormThreads)
    residual_rmsnorm_kernel(const float* slabs, int slices, int64_t rows, int64_t n,
                            const float* __restrict__ bias, float* x, const float* __restrict__ weight,
                            float* h, uint16_t* __restrict__ h_bf16, float eps) {
  pdl_enter();
  const int64_t count = rows * n, row0 = static_cast<int64_t>(blockIdx.x) * n;
  const float* sr = slabs + row0;
  float* xr = x + row0;
  constexpr int64_t kStep = kResidualNormThreads;
  for (int64_t i0 = threadIdx.x; i0 < n; i0 += kResidualNormBatch * kStep) {
    float s[kResidualNormBatch], v[kResidualNormBatch] = {};
#pragma unroll
    for (int j = 0; j < kResidualNormBatch; ++j) {
      const int64_t i = i0 + j * kStep;
      s[j] = i < n ? sr[i] : 0.0f;
    }
    for (int z = 1; z < slices; ++z) {
#pragma unroll
      for (int j = 0; j < kResidualNormBatch; ++j) {
        const int64_t i = i0 + j * kStep;
        if (i < n) s[j] = s[j] + sr[z * count + i];
      }
    }
#pragma unroll
    for (int j = 0; j < kResidualNormBatch; ++j) {
      const int64_t i = i0 + j * kStep;
      if (i < n) {
        float t = s[j];
        if (bias != nullptr) t = t + bias[i];
        v[j] = xr[i] + t;
      }
    }
#pragma unroll
    for (int j = 0; j < kResidualNormBatch; ++j) {
      const int64_t i = i0 + j * kStep;
      if (i < n) xr[i] = v[j];
    }
  }
  __syncthreads();
  const float inv = rms_inverse_of_row(xr, n, eps);
  float* hr = h + row0;
  uint16_t* hb = h_bf16 != nullptr ? h_bf16 + row0 : nullptr;
  for (int64_t i0 = threadIdx.x; i0 < n; i0 += kResidualNormBatch * kStep) {
    float y[kResidualNormBatch] = {};
#pragma unroll
    for (int j = 0; j < kResidualNormBatch; ++j) {
      const int64_t i = i0 + j * kStep;
      if (i < n) y[j] = (xr[i] * inv) * weight[i];
    }
#pragma unroll
    for (int j = 0; j < kResidualNormBatch; ++j) {
      const int64_t i = i0 + j * kStep;
      if (i < n) {
        hr[i] = y[j];
        if (hb != nullptr) hb[i] = bf16_bits(y[j]);
      }
    }
  }
}

// Calls of up to kFewRows rows (decode, verify and batched decode steps)
// of up to kStagedMax values each (4096: the hidden size of every shape
// measured, 0.5B to 8B) take residual_rmsnorm_staged_kernel instead
// (TANDEM_CUDA_ROW_NORM=0 keeps the kernel above): the same block, the same
// element ownership and the same three phases, with fewer dependent memory
// round trips (ADR 0061):
//   - the norm's weights and the bias are read before pdl_wait() (no kernel
//     writes them, launch.cuh), so they arrive while the GEMM still runs;
//   - phase 1 keeps the new x in registers and in shared memory, so phase 2
//     sums the squares from shared memory (the same values, in rmsnorm's
//     order) and phase 3 needs no second read of x from global memory.
// Every slab read of an element is by the thread that later writes its h,
// after two barriers: slabs and h may again be one buffer.
// Calls of more rows (prefill chunks) keep the kernel above: the staged one
// measured 2.4% slower there (8B, 512-token prefill), 3.6% faster at B = 1.
constexpr int64_t kStagedMax = int64_t{kResidualNormBatch} * kResidualNormThreads;

// The few-rows kernels' phases for a thread's P elements idx[q] of row
// blockIdx's row (an index >= n: none). Before pdl_wait(): the norm's weights
// and the bias (no kernel writes them, launch.cuh).
template <int P>
__device__ __forceinline__ void norm_params(const int64_t (&idx)[P], int64_t n,
                                            const float* __restrict__ weight, const float* __restrict__ bias,
                                            float (&wv)[P], float (&bv)[P]) {
#pragma unroll
  for (int q = 0; q < P; ++q) {
    wv[q] = idx[q] < n ? weight[idx[q]] : 0.0f;
    bv[q] = bias != nullptr && idx[q] < n ? bias[idx[q]] : 0.0f;
  }
}

// Phase 1: v[q] = x + (slab 0 + slab 1 + … + bias), stored to x; slab loads
// queued kSlabBatch at a time (residual_add_kernel's arithmetic).
template <int P>
__device__ __forceinline__ void add_residual(const int64_t (&idx)[P], int64_t n, const float* sr, int slices,
                                             int64_t count, bool has_bias, const float (&bv)[P], float* xr,
                                             float (&v)[P]) {
  float s[P];
#pragma unroll
  for (int q = 0; q < P; ++q) {
    s[q] = idx[q] < n ? sr[idx[q]] : 0.0f;
    v[q] = idx[q] < n ? xr[idx[q]] : 0.0f;
  }
  for (int z0 = 1; z0 < slices; z0 += kSlabBatch) {
#pragma unroll
    for (int q = 0; q < P; ++q)
      if (idx[q] < n) s[q] = add_slab_batch<kSlabBatch>(s[q], sr, slices, count, idx[q], z0);
  }
#pragma unroll
  for (int q = 0; q < P; ++q) {
    if (idx[q] < n) {
      float t = s[q];
      if (has_bias) t = t + bv[q];
      v[q] = v[q] + t;
      xr[idx[q]] = v[q];
    }
  }
}

// Phase 3: h = (x · inv) · weight, and its bf16 copy.
template <int P>
__device__ __forceinline__ void store_normed(const int64_t (&idx)[P], int64_t n, const float (&v)[P],
                                             float inv, const float (&wv)[P], float* hr, uint16_t* hb) {
#pragma unroll
  for (int q = 0; q < P; ++q) {
    if (idx[q] < n) {
      const float y = (v[q] * inv) * wv[q];
      hr[idx[q]] = y;
      if (hb != nullptr) hb[idx[q]] = bf16_bits(y);
    }
  }
}

__global__ void __launch_bounds__(kResidualNormThreads)
    residual_rmsnorm_staged_kernel(const float* slabs, int slices, int64_t rows, int64_t n,
                                   const float* __restrict__ bias, float* x, const float* __restrict__ weight,
                                   float* h, uint16_t* __restrict__ h_bf16, float eps) {
  __shared__ float xs[kStagedMax];
  constexpr int P = kResidualNormBatch;
  int64_t idx[P];
#pragma unroll
  for (int j = 0; j < P; ++j) idx[j] = threadIdx.x + int64_t{j} * kResidualNormThreads;
  pdl_launch_dependents();
  float wv[P], bv[P], v[P];
  norm_params(idx, n, weight, bias, wv, bv);
  pdl_wait();
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * n;
  add_residual(idx, n, slabs + row0, slices, rows * n, bias != nullptr, bv, x + row0, v);
#pragma unroll
  for (int j = 0; j < P; ++j)
    if (idx[j] < n) xs[idx[j]] = v[j];
  __syncthreads();
  const float inv = rms_inverse_of_row(xs, n, eps);
  store_normed(idx, n, v, inv, wv, h + row0, h_bf16 != nullptr ? h_bf16 + row0 : nullptr);
}

// The same three phases spread over a cluster of kNormClusterBlocks blocks
// per row (ADR 0091): block b plays rms_inverse_of_row's warp b, so it owns
// the elements that warp's threads sum, i = 256 j + 32 b + lane (a 128-byte
// run of every 256), adds their slabs, bias and residual (thread (lane, warp w)
// takes j = w, w + 8, …), and its first warp sums their squares in that warp's
// order (j ascending) and reduces them with the same xor tree. Each block
// pushes its warp sum into every block's shared memory (distributed shared
// memory), one cluster barrier, then every block runs rms_of_warp_sums's tree
// over the eight: the staged kernel's arithmetic, operation for operation.
// Eight blocks of 256 threads instead of one of 1,024: each thread loads one or
// two elements' slabs, and a kernel boundary measured ~1 µs dearer for one
// 1,024-thread block than for a spread grid (bench_handoff_latency).
constexpr int kNormClusterBlocks = kRmsThreads / 32;
constexpr int kNormClusterThreads = 256;
constexpr int kNormClusterPer = static_cast<int>(kStagedMax / (kNormClusterBlocks * kNormClusterThreads));

__global__ void __launch_bounds__(kNormClusterThreads)
    residual_rmsnorm_cluster_kernel(const float* slabs, int slices, int64_t rows, int64_t n,
                                    const float* __restrict__ bias, float* x,
                                    const float* __restrict__ weight, float* h, uint16_t* __restrict__ h_bf16,
                                    float eps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // clusters; launched only on sm_90+ devices
  namespace cg = cooperative_groups;
  constexpr int P = kNormClusterPer, kWarps = kNormClusterThreads / 32;
  __shared__ float xs[P * kNormClusterThreads];  // [j][lane], this block's elements
  __shared__ float sums[kNormClusterBlocks];     // warp b's sum, pushed by block b
  __shared__ float total;
  const int b = static_cast<int>(blockIdx.x), lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  int64_t idx[P];
#pragma unroll
  for (int q = 0; q < P; ++q) idx[q] = int64_t{kRmsThreads} * (w + q * kWarps) + 32 * b + lane;
  pdl_launch_dependents();
  float wv[P], bv[P], v[P];
  norm_params(idx, n, weight, bias, wv, bv);
  pdl_wait();
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * n;
  add_residual(idx, n, slabs + row0, slices, rows * n, bias != nullptr, bv, x + row0, v);
#pragma unroll
  for (int q = 0; q < P; ++q)
    if (idx[q] < n) xs[(w + q * kWarps) * 32 + lane] = v[q];
  __syncthreads();
  cg::cluster_group cluster = cg::this_cluster();
  if (w == 0) {  // rms thread 32 b + lane: x[i]² over its i ascending, from 0
    float sum = 0.0f;
    for (int j = 0; int64_t{kRmsThreads} * j + 32 * b + lane < n; ++j)
      sum += xs[j * 32 + lane] * xs[j * 32 + lane];
    sum = rms_warp_sum(sum);
    if (lane < kNormClusterBlocks) *cluster.map_shared_rank(&sums[b], lane) = sum;
  }
  cluster.sync();  // every block's sums[] is complete; no remote access after it
  if (w == 0) {    // rms_of_warp_sums's tree
    float t = lane < kNormClusterBlocks ? sums[lane] : 0.0f;
#pragma unroll
    for (int offset = 4; offset > 0; offset >>= 1) t += __shfl_xor_sync(0xffffffffu, t, offset);
    if (lane == 0) total = t;
  }
  __syncthreads();
  const float mean = total / static_cast<float>(n);
  const float inv = 1.0f / sqrtf(mean + eps);
  store_normed(idx, n, v, inv, wv, h + row0, h_bf16 != nullptr ? h_bf16 + row0 : nullptr);
#else
  __trap();
#endif
}

// TANDEM_CUDA_NORM_CLUSTER (read once): 1 runs the cluster kernel where the staged one would run.
bool norm_cluster_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TANDEM_CUDA_NORM_CLUSTER");
    return e != nullptr && std::atoi(e) != 0;
  }();
  return on;
}

// TANDEM_CUDA_ROW_NORM (read once): 0 keeps residual_rmsnorm_kernel for every row.
bool row_norm_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TANDEM_CUDA_ROW_NORM");
    return e == nullptr || std::atoi(e) != 0;
  }();
  return on;
}

template <int Batch>
__global__ void swiglu_kernel(const float* slabs, int slices, int64_t rows, int64_t inter,
                              const float* __restrict__ bias, float* __restrict__ out,
                              uint16_t* __restrict__ out_bf16) {
  pdl_enter();
  const int64_t r = blockIdx.x, count = rows * 2 * inter;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < inter;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const int64_t base = r * 2 * inter;
    const double g = partial_value<Batch>(slabs, slices, count, base + i, bias, i);
    const float up = partial_value<Batch>(slabs, slices, count, base + inter + i, bias, inter + i);
    const float v = static_cast<float>(g / (1.0 + exp(-g)) * static_cast<double>(up));
    out[r * inter + i] = v;
    if (out_bf16 != nullptr) out_bf16[r * inter + i] = bf16_bits(v);
  }
}

// One block per (row, head slot): slots [0, n_heads) are q heads, then the
// n_kv k heads, then the n_kv v heads.
template <int Batch>
__global__ void qkv_rope_kv_kernel(const float* slabs, int slices, int64_t rows,
                                   const float* __restrict__ bias, int n_heads, DeviceKvPool pool,
                                   const int32_t* __restrict__ rope_positions,
                                   const float* __restrict__ inv_freq, int rotary_dim, bool neox,
                                   const int32_t* __restrict__ positions,
                                   const int32_t* __restrict__ block_tables, int64_t table_stride,
                                   float* __restrict__ q_out) {
  __shared__ float vals[kMaxHeadDim];
  __shared__ float cos_s[kMaxHeadDim / 2], sin_s[kMaxHeadDim / 2];
  const int64_t r = blockIdx.x;
  const int slot = blockIdx.y;
  const int hd = pool.head_dim, n_kv = pool.n_kv_heads;
  const int64_t width = static_cast<int64_t>(n_heads + 2 * n_kv) * hd;
  const int64_t col0 = static_cast<int64_t>(slot) * hd;
  const bool is_v = slot >= n_heads + n_kv;
  const int half = rotary_dim / 2;
  // Before the wait (launch.cuh): the rotation's cos/sin (inv_freq is a weight,
  // the rope positions a host copy) and, for k and v, where the row goes in the
  // pool (positions and block table, host copies), so neither chain of loads
  // sits between the GEMM and this kernel's result (ADR 0061).
  pdl_launch_dependents();
  if (!is_v) rope_table(static_cast<float>(rope_positions[r]), inv_freq, half, cos_s, sin_s);
  // kv_write's placement: block table entry, slot within the block, kv head.
  int64_t base = 0;
  if (slot >= n_heads) {
    const int kv_head = is_v ? slot - n_heads - n_kv : slot - n_heads;
    const int32_t p = positions[r];
    const int32_t* table = block_tables + r * table_stride;
    base = ((static_cast<int64_t>(table[p / pool.tokens_per_block]) * pool.tokens_per_block +
             p % pool.tokens_per_block) *
                n_kv +
            kv_head) *
           hd;
  }
  pdl_wait();
  head_values<Batch>(slabs, slices, rows, width, bias, r, col0, hd, vals);
  __syncthreads();
  if (!is_v) {  // uniform in the block
    float* const rotate[1] = {vals};
    rope_rotate<(kMaxHeadDim / 2 + 127) / 128>(rotate, 1, half, neox, cos_s, sin_s);
  }
  if (slot < n_heads) {
    float* o = q_out + (r * n_heads + slot) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) o[d] = vals[d];
    return;
  }
  float* dst = is_v ? pool.v : pool.k;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) dst[base + d] = vals[d];
}

Status check_partials(const GemmPartials& p, const char* op) {
  if (p.slabs == nullptr && p.m > 0) return invalid_argument(std::string(op) + ": no partials");
  if (p.m < 0 || p.m > 0x7fffffffLL || p.n <= 0 || p.slices < 1)
    return invalid_argument(std::string(op) +
                            ": need 0 <= m < 2^31, n > 0 and slices >= 1 (got m=" + std::to_string(p.m) +
                            ", n=" + std::to_string(p.n) + ", slices=" + std::to_string(p.slices) + ")");
  return Status::Ok();
}

}  // namespace

Status residual_add_partials(const Stream& stream, const GemmPartials& p, const float* bias, float* x) {
  TANDEM_RETURN_IF_ERROR(check_partials(p, "residual_add_partials"));
  if (p.m == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((p.m * p.n + kThreads - 1) / kThreads, 65535 * 16);
  return launch_kernel("residual_add_partials",
                       p.m <= kFewRows ? residual_add_kernel<kSlabBatch> : residual_add_kernel<1>,
                       dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream.handle(), p.slabs,
                       p.slices, p.m, p.n, bias, x);
}

Status residual_add_rmsnorm_partials(const Stream& stream, const GemmPartials& p, const float* bias, float* x,
                                     const float* norm_weight, float eps, float* h, uint16_t* h_bf16,
                                     RowNormKernel kernel) {
  TANDEM_RETURN_IF_ERROR(check_partials(p, "residual_add_rmsnorm_partials"));
  if (p.m == 0) return Status::Ok();
  if (norm_weight == nullptr || h == nullptr)
    return invalid_argument("residual_add_rmsnorm_partials: need the norm's weight and an output");
  const bool few = p.n <= kStagedMax && p.m <= kFewRows;
  const bool cluster = current_device_sm90() &&
                       (kernel == RowNormKernel::cluster ||
                        (kernel == RowNormKernel::by_knob && row_norm_enabled() && norm_cluster_enabled()));
  if (few && cluster)
    return launch_kernel("residual_add_rmsnorm_partials (cluster)", residual_rmsnorm_cluster_kernel,
                         dim3(kNormClusterBlocks, static_cast<unsigned>(p.m)), dim3(kNormClusterThreads), 0,
                         stream.handle(), LaunchCluster{kNormClusterBlocks}, p.slabs, p.slices, p.m, p.n,
                         bias, x, norm_weight, h, h_bf16, eps);
  if (few && (kernel == RowNormKernel::one_block || row_norm_enabled()))
    return launch_kernel("residual_add_rmsnorm_partials (staged)", residual_rmsnorm_staged_kernel,
                         dim3(static_cast<unsigned>(p.m)), dim3(kResidualNormThreads), 0, stream.handle(),
                         p.slabs, p.slices, p.m, p.n, bias, x, norm_weight, h, h_bf16, eps);
  return launch_kernel("residual_add_rmsnorm_partials", residual_rmsnorm_kernel,
                       dim3(static_cast<unsigned>(p.m)), dim3(kResidualNormThreads), 0, stream.handle(),
                       p.slabs, p.slices, p.m, p.n, bias, x, norm_weight, h, h_bf16, eps);
}

Status swiglu_partials(const Stream& stream, const GemmPartials& p, const float* bias, float* out,
                       uint16_t* out_bf16) {
  TANDEM_RETURN_IF_ERROR(check_partials(p, "swiglu_partials"));
  if (p.n % 2 != 0) return invalid_argument("swiglu_partials: n must be 2 * intermediate size (got odd n)");
  if (p.m == 0) return Status::Ok();
  const int64_t inter = p.n / 2;
  const dim3 grid(static_cast<unsigned>(p.m),
                  static_cast<unsigned>(std::min<int64_t>((inter + kThreads - 1) / kThreads, 65535)));
  return launch_kernel("swiglu_partials", p.m <= kFewRows ? swiglu_kernel<kSlabBatch> : swiglu_kernel<1>,
                       grid, dim3(kThreads), 0, stream.handle(), p.slabs, p.slices, p.m, inter, bias, out,
                       out_bf16);
}

Status qkv_rope_kv_write(const Stream& stream, const GemmPartials& p, const float* bias, int n_heads,
                         const DeviceKvPool& pool, const int32_t* rope_positions, const float* inv_freq,
                         int rotary_dim, RopeLayout layout, const int32_t* positions,
                         const int32_t* block_tables, int64_t table_stride, float* q_out) {
  TANDEM_RETURN_IF_ERROR(check_partials(p, "qkv_rope_kv_write"));
  if (n_heads <= 0 || pool.n_kv_heads <= 0 || pool.head_dim <= 0 || pool.head_dim > kMaxHeadDim ||
      pool.tokens_per_block <= 0 || rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > pool.head_dim ||
      p.n != static_cast<int64_t>(n_heads + 2 * pool.n_kv_heads) * pool.head_dim) {
    return invalid_argument(
        "qkv_rope_kv_write: need n = (n_heads + 2 n_kv_heads) * head_dim, head_dim <= " +
        std::to_string(kMaxHeadDim) + ", rotary_dim even and <= head_dim (got n=" + std::to_string(p.n) +
        ", n_heads=" + std::to_string(n_heads) + ", n_kv_heads=" + std::to_string(pool.n_kv_heads) +
        ", head_dim=" + std::to_string(pool.head_dim) + ", rotary_dim=" + std::to_string(rotary_dim) + ")");
  }
  if (p.m == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(p.m), static_cast<unsigned>(n_heads + 2 * pool.n_kv_heads));
  const int threads = pool.head_dim >= 256 ? 256 : 128;
  return launch_kernel(
      "qkv_rope_kv_write", p.m <= kFewRows ? qkv_rope_kv_kernel<kSlabBatch> : qkv_rope_kv_kernel<1>, grid,
      dim3(threads), 0, stream.handle(), p.slabs, p.slices, p.m, bias, n_heads, pool, rope_positions,
      inv_freq, rotary_dim, layout == RopeLayout::neox, positions, block_tables, table_stride, q_out);
}

}  // namespace tandem::kernels::gpu
