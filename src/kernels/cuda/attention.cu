// attention.cu — paged KV writes and causal GQA attention on the device
// (kernels/cuda_ops.h). Tested on an H200 (tests/kernels/cuda/attention_test.cpp).
//
// One block of kThreads per (row, head). Keys are visited in chunks
// [c·32, c·32 + 32) ∩ [lo, p] aligned to absolute positions. Per chunk, the
// K and V rows are first staged in shared memory by all threads at once (a
// chain of dependent global loads per key made decode latency-bound); then:
//   scores: warp w takes keys w, w + 4, …; lane l sums q[d]·k[d] over
//     d = l, l + 32, … in order, then a fixed xor tree; s = scale · dot;
//   m = max(running max, chunk max) (exact in any order); alpha =
//     exp(old max − m); p_j = exp(s_j − m);
//   sum = sum·alpha, then + p_j in key order (every thread computes the same
//     sum the same way); out[d] = out[d]·alpha, then + p_j·v_j[d] in key order
//     (thread t owns d = t, t + kThreads, …).
// Finally out = acc / sum. Everything is a function of (q, p, window, keys),
// so the grouping of rows into a call cannot change a bit.
#include <cuda_runtime.h>

#include <string>

#include "cuda/cuda_check.h"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHeadDim = 512;
constexpr int kDimsPerThread = kMaxHeadDim / kThreads;

__device__ __forceinline__ int64_t kv_offset(const DeviceKvPool& pool, const int32_t* table, int32_t position,
                                             int kv_head) {
  const int32_t block = table[position / pool.tokens_per_block];
  const int32_t slot = position % pool.tokens_per_block;
  return ((static_cast<int64_t>(block) * pool.tokens_per_block + slot) * pool.n_kv_heads + kv_head) *
         pool.head_dim;
}

__global__ void kv_write_kernel(DeviceKvPool pool, const float* __restrict__ k_new,
                                const float* __restrict__ v_new, const int32_t* __restrict__ positions,
                                const int32_t* __restrict__ block_tables, int64_t table_stride) {
  const int64_t r = blockIdx.x;
  const int32_t* table = block_tables + r * table_stride;
  const int width = pool.n_kv_heads * pool.head_dim;
  const int64_t base = kv_offset(pool, table, positions[r], 0);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    pool.k[base + i] = k_new[r * width + i];
    pool.v[base + i] = v_new[r * width + i];
  }
}

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* __restrict__ q, int n_heads, DeviceKvPool pool,
                     const int32_t* __restrict__ positions, const int32_t* __restrict__ block_tables,
                     int64_t table_stride, float scale, int window, float* __restrict__ out) {
  __shared__ float q_s[kMaxHeadDim];
  __shared__ float score_s[kAttentionChunk];
  __shared__ float weight_s[kAttentionChunk];
  // The chunk's K and V rows, staged once per chunk by all threads (the loads
  // are independent, so they overlap); [key][head_dim] each.
  extern __shared__ float kv_s[];
  float* k_s = kv_s;
  float* v_s = kv_s + kAttentionChunk * pool.head_dim;
  const int64_t r = blockIdx.x;
  const int head = blockIdx.y;
  const int hd = pool.head_dim;
  const int kv_head = head / (n_heads / pool.n_kv_heads);
  const int32_t p = positions[r];
  const int32_t lo = window > 0 ? max(0, p - window + 1) : 0;
  const int32_t* table = block_tables + r * table_stride;
  const float* qr = q + (r * n_heads + head) * hd;
  for (int d = threadIdx.x; d < hd; d += kThreads) q_s[d] = qr[d];
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float acc[kDimsPerThread];
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) acc[i] = 0.0f;
  float run_max = -INFINITY, sum = 0.0f;

  for (int32_t c0 = (lo / kAttentionChunk) * kAttentionChunk; c0 <= p; c0 += kAttentionChunk) {
    const int32_t first = max(lo, c0), last = min(p, c0 + kAttentionChunk - 1);
    const int count = last - first + 1;
    for (int j = warp; j < count; j += kThreads / 32) {
      const int64_t off = kv_offset(pool, table, first + j, kv_head);
      for (int d = lane; d < hd; d += 32) {
        k_s[j * hd + d] = pool.k[off + d];
        v_s[j * hd + d] = pool.v[off + d];
      }
    }
    __syncthreads();
    for (int j = warp; j < count; j += kThreads / 32) {
      const float* kr = k_s + j * hd;
      float dot = 0.0f;
      for (int d = lane; d < hd; d += 32) dot += q_s[d] * kr[d];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      if (lane == 0) score_s[j] = scale * dot;
    }
    __syncthreads();
    float chunk_max = -INFINITY;
    for (int j = 0; j < count; ++j) chunk_max = fmaxf(chunk_max, score_s[j]);
    const float new_max = fmaxf(run_max, chunk_max);
    const float alpha = expf(run_max - new_max);  // 0 on the first chunk (exp(-inf))
    if (threadIdx.x < count) weight_s[threadIdx.x] = expf(score_s[threadIdx.x] - new_max);
    __syncthreads();
    sum = sum * alpha;
    for (int j = 0; j < count; ++j) sum += weight_s[j];
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int d = threadIdx.x + i * kThreads;
      if (d < hd) {
        float a = acc[i] * alpha;
        for (int j = 0; j < count; ++j) a += weight_s[j] * v_s[j * hd + d];
        acc[i] = a;
      }
    }
    run_max = new_max;
    __syncthreads();  // score_s / weight_s / k_s / v_s are rewritten by the next chunk
  }
  float* o = out + (r * n_heads + head) * hd;
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int d = threadIdx.x + i * kThreads;
    if (d < hd) o[d] = acc[i] / sum;
  }
}

Status check_pool(const DeviceKvPool& pool, const char* op) {
  if (pool.tokens_per_block <= 0 || pool.n_kv_heads <= 0 || pool.head_dim <= 0 ||
      pool.head_dim > kMaxHeadDim) {
    return invalid_argument(std::string(op) + ": need tokens_per_block, n_kv_heads > 0 and 0 < head_dim <= " +
                            std::to_string(kMaxHeadDim) +
                            " (got tokens_per_block=" + std::to_string(pool.tokens_per_block) +
                            ", n_kv_heads=" + std::to_string(pool.n_kv_heads) +
                            ", head_dim=" + std::to_string(pool.head_dim) + ")");
  }
  return Status::Ok();
}

}  // namespace

Status kv_write(const Stream& stream, const DeviceKvPool& pool, const float* k_new, const float* v_new,
                int64_t rows, const int32_t* positions, const int32_t* block_tables, int64_t table_stride) {
  TANDEM_RETURN_IF_ERROR(check_pool(pool, "kv_write"));
  if (rows < 0 || rows > 0x7fffffffLL || table_stride < 0) {
    return invalid_argument("kv_write: need 0 <= rows < 2^31 and table_stride >= 0");
  }
  if (rows == 0) return Status::Ok();
  kv_write_kernel<<<static_cast<unsigned>(rows), 256, 0, stream.handle()>>>(pool, k_new, v_new, positions,
                                                                            block_tables, table_stride);
  return launch_status("kv_write");
}

Status attention(const Stream& stream, const float* q, int64_t rows, int n_heads, const DeviceKvPool& pool,
                 const int32_t* positions, const int32_t* block_tables, int64_t table_stride, float scale,
                 int window, float* out) {
  TANDEM_RETURN_IF_ERROR(check_pool(pool, "attention"));
  if (n_heads <= 0 || n_heads % pool.n_kv_heads != 0 || n_heads > 65535) {
    return invalid_argument(
        "attention: n_heads must be a positive multiple of n_kv_heads, at most 65535 (got " +
        std::to_string(n_heads) + " and " + std::to_string(pool.n_kv_heads) + ")");
  }
  if (rows < 0 || rows > 0x7fffffffLL || table_stride < 0) {
    return invalid_argument("attention: need 0 <= rows < 2^31 and table_stride >= 0");
  }
  if (rows == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(n_heads));
  const int smem = 2 * kAttentionChunk * pool.head_dim * static_cast<int>(sizeof(float));
  if (smem > 48 * 1024) {
    TANDEM_RETURN_IF_ERROR(
        cuda_status(cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    "cudaFuncSetAttribute(attention, " + std::to_string(smem) + " bytes of shared memory)"));
  }
  attention_kernel<<<grid, kThreads, smem, stream.handle()>>>(q, n_heads, pool, positions, block_tables,
                                                              table_stride, scale, window, out);
  return launch_status("attention");
}

}  // namespace tandem::kernels::gpu
