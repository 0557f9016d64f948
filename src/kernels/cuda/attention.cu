// attention.cu — paged KV writes and causal GQA attention on the device
// (kernels/cuda_ops.h). Tested on an H200 (tests/kernels/cuda/attention_test.cpp).
//
// Keys are visited in chunks [c·32, c·32 + 32) ∩ [lo, p] aligned to absolute
// positions (flash-decoding with a fixed combine, ADR 0028). Each chunk gives
// a partial (m_c, l_c, a_c[d]) computed by one 128-thread block:
//   staging: the chunk's K and V rows are copied to shared memory by all
//     threads at once (the keys' table lookups, then 16-byte cp.async
//     copies: two rounds of independent loads, so decode is not
//     latency-chained; ADR 0061);
//   scores: warp w takes keys w, w + 4, …; lane l sums q[d]·k[d] over
//     d = l, l + 32, … by fma in order, then a fixed xor tree; s = scale · dot;
//   m_c = max of the scores; w_j = exp(s_j − m_c); l_c = Σ w_j in key order;
//     a_c[d] = Σ w_j·v_j[d] by fma in key order (thread t owns d = t, t + 128, …).
// The partials are merged in chunk order, c = first … last, from M = −inf,
// L = A = 0: M' = max(M, m_c); α = exp(M − M'), β = exp(m_c − M');
// L = L·α + l_c·β; A[d] = A[d]·α + a_c[d]·β (each product and sum rounded
// separately, no fma); out = A / L.
// The launch shapes give the same bits (tested):
//   split: one block per (row, head, chunk) writes its partial to the
//     workspace; the block that finishes last for its (row, head) (an atomic
//     counter) merges them in chunk order — decode and verify steps get
//     rows × heads × chunks blocks instead of rows × heads;
//   serial: one block per (row, head) computes the partials one after
//     another and merges each as it goes (no workspace needed);
//   kv split (ADR 0087): as split, one block per (row, kv head, chunk) whose
//     warps compute the kv head's q heads, the chunk staged once for them.
// All three can also write their outputs rounded to bf16 (bf16_bits, to_bf16's bits):
// the o projection's GEMM input without a to_bf16 pass (ADR 0056).
// Everything is a function of (q, p, window, keys): which rows share a call,
// and which shape the launcher picks, cannot change a bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/env.h"
#include "cuda/attention_tile.h"
#include "cuda/bf16_bits.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "cuda/qkv_values.cuh"
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

__global__ void kv_write_kernel(DeviceKvPool pool, const float* k_new, const float* v_new,
                                const int32_t* __restrict__ positions,
                                const int32_t* __restrict__ block_tables, int64_t table_stride) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int32_t* table = block_tables + r * table_stride;
  const int width = pool.n_kv_heads * pool.head_dim;
  const int64_t base = kv_offset(pool, table, positions[r], 0);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    pool.k[base + i] = k_new[r * width + i];
    pool.v[base + i] = v_new[r * width + i];
  }
}

// What one block needs for one (row, head): its query in shared memory and
// the key range [lo, p].
struct RowHead {
  const int32_t* table;
  int kv_head;
  int32_t lo, p;
};

// The row's range and table: positions and block tables only, no kernel's
// output, so the split shape reads them before pdl_wait() (launch.cuh).
__device__ __forceinline__ RowHead row_head(int n_heads, const DeviceKvPool& pool,
                                            const int32_t* __restrict__ positions,
                                            const int32_t* __restrict__ block_tables, int64_t table_stride,
                                            int window, int64_t r, int head) {
  RowHead rh;
  rh.kv_head = head / (n_heads / pool.n_kv_heads);
  rh.p = positions[r];
  rh.lo = window > 0 ? max(0, rh.p - window + 1) : 0;
  rh.table = block_tables + r * table_stride;
  return rh;
}

__device__ __forceinline__ void load_query(const float* q, int n_heads, const DeviceKvPool& pool, int64_t r,
                                           int head, float* q_s) {
  const float* qr = q + (r * n_heads + head) * pool.head_dim;
  for (int d = threadIdx.x; d < pool.head_dim; d += kThreads) q_s[d] = qr[d];
}

// Shared memory of one block: the query, the chunk's scores and weights, and
// (dynamic, after these) the chunk's K and V rows [key][head_dim] each.
struct ChunkSmem {
  int64_t offset[kAttentionChunk];  // the chunk's keys' offsets in the pool (staging)
  float q[kMaxHeadDim];
  float score[kAttentionChunk];
  float weight[kAttentionChunk];
};

// The keys of chunk [c0, c0 + 32) in the row's range [lo, p]: first .. first + count - 1.
__device__ __forceinline__ int32_t chunk_first(const RowHead& rh, int32_t c0) { return max(rh.lo, c0); }
__device__ __forceinline__ int chunk_count(const RowHead& rh, int32_t c0) {
  return min(rh.p, c0 + kAttentionChunk - 1) - chunk_first(rh, c0) + 1;
}

// Chunk slot z of a split-shape block: chunk c0 = first_chunk + 32·z of the
// row's `chunks`, its `count` keys (meaningful for z < chunks only).
struct ChunkSlot {
  int chunks;
  int32_t c0;
  int count;
};

// Whether the staging may copy 16 bytes at a time (uniform: a property of the pool).
__device__ __forceinline__ bool stage_vectors(const DeviceKvPool& pool) {
  return (pool.head_dim & 3) == 0 &&
         ((reinterpret_cast<uintptr_t>(pool.k) | reinterpret_cast<uintptr_t>(pool.v)) & 15u) == 0;
}

// Staging of keys first .. first + count - 1 of the row's range (K and V) to
// k_s / v_s [key][head_dim], in two dependent steps of independent loads
// (ADR 0061): stage_offsets (threads 0..count-1 look up their key's block in
// the table: sm.offset), then, after a barrier, stage_rows (every thread
// queues its 16-byte pieces of the K and V rows with cp.async; scalar loads
// where head_dim % 4 != 0). Only moves bytes.
__device__ __forceinline__ void stage_offsets(const DeviceKvPool& pool, const RowHead& rh, int32_t first,
                                              int count, ChunkSmem& sm) {
  if (threadIdx.x < count)
    sm.offset[threadIdx.x] = kv_offset(pool, rh.table, first + threadIdx.x, rh.kv_head);
}

// stage_rows without its wait: the 16-byte copies are queued and committed
// (one cp.async group), scalar rows are loaded; cp_async_wait<0>() finishes.
__device__ __forceinline__ void stage_rows_issue(const DeviceKvPool& pool, int count, const ChunkSmem& sm,
                                                 float* k_s, float* v_s) {
  const int hd = pool.head_dim;
  if (stage_vectors(pool)) {
    const int parts = hd / 4;  // 16-byte pieces per row
    const uint32_t ks = static_cast<uint32_t>(__cvta_generic_to_shared(k_s));
    const uint32_t vs = static_cast<uint32_t>(__cvta_generic_to_shared(v_s));
    for (int piece = threadIdx.x; piece < count * parts; piece += kThreads) {
      const int j = piece / parts, u = piece - j * parts;
      const int64_t off = sm.offset[j] + 4 * u;
      const uint32_t at = static_cast<uint32_t>((j * hd + 4 * u) * sizeof(float));
      cp_async16(ks + at, pool.k + off, true);
      cp_async16(vs + at, pool.v + off, true);
    }
    cp_async_commit();
  } else {
    for (int e = threadIdx.x; e < count * hd; e += kThreads) {
      const int j = e / hd, d = e - j * hd;
      k_s[e] = pool.k[sm.offset[j] + d];
      v_s[e] = pool.v[sm.offset[j] + d];
    }
  }
}

__device__ __forceinline__ void stage_rows(const DeviceKvPool& pool, int count, const ChunkSmem& sm,
                                           float* k_s, float* v_s) {
  stage_rows_issue(pool, count, sm, k_s, v_s);
  cp_async_wait<0>();
}

// The partial of chunk [c0, c0 + 32) ∩ [lo, p]: returns m_c and l_c (the same
// in every thread), acc[i] = a_c[threadIdx.x + i·kThreads]. Starts and ends
// with a barrier, so it can be called in a loop. q_s must be filled; with
// `offsets_ready`, sm.offset already holds the chunk's stage_offsets; with
// `staged` >= 0 only the chunk's first `staged` keys are copied from the pool
// (the rest are in k_s / v_s already: attention_from_qkv's own key); with
// `rows_issued`, the caller has queued those copies (stage_rows_issue).
__device__ __forceinline__ void chunk_partial(const DeviceKvPool& pool, const RowHead& rh, int32_t c0,
                                              float scale, float softcap, ChunkSmem& sm, float* k_s,
                                              float* v_s, float& m_c, float& l_c,
                                              float (&acc)[kDimsPerThread], bool offsets_ready = false,
                                              int staged = -1, bool rows_issued = false) {
  const int hd = pool.head_dim;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t first = chunk_first(rh, c0);
  const int count = chunk_count(rh, c0);
  __syncthreads();  // the previous chunk's readers are done with the shared arrays
  if (!offsets_ready) {
    stage_offsets(pool, rh, first, count, sm);
    __syncthreads();
  }
  if (rows_issued)
    cp_async_wait<0>();
  else
    stage_rows(pool, staged < 0 ? count : staged, sm, k_s, v_s);
  __syncthreads();
  for (int j = warp; j < count; j += kThreads / 32) {
    const float* kr = k_s + j * hd;
    float dot = 0.0f;
    for (int d = lane; d < hd; d += 32) dot = __fmaf_rn(sm.q[d], kr[d], dot);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) dot = __fadd_rn(dot, __shfl_xor_sync(0xffffffffu, dot, o));
    float s = __fmul_rn(scale, dot);
    if (softcap > 0.0f) s = __fmul_rn(tanhf(__fdiv_rn(s, softcap)), softcap);  // Gemma 2: tanh(s / cap) * cap
    if (lane == 0) sm.score[j] = s;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int j = 0; j < count; ++j) mx = fmaxf(mx, sm.score[j]);
  if (threadIdx.x < count) sm.weight[threadIdx.x] = expf(__fsub_rn(sm.score[threadIdx.x], mx));
  __syncthreads();
  float sum = 0.0f;
  for (int j = 0; j < count; ++j) sum = __fadd_rn(sum, sm.weight[j]);
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    const int d = threadIdx.x + i * kThreads;
    float a = 0.0f;
    if (d < hd) {
      for (int j = 0; j < count; ++j) a = __fmaf_rn(sm.weight[j], v_s[j * hd + d], a);
    }
    acc[i] = a;
  }
  m_c = mx;
  l_c = sum;
}

// Running merge of chunk partials, in chunk order (the one formula every
// launch shape uses). A thread holds N of the head's dims, d = first + i·step
// (a block's thread: threadIdx.x + i·kThreads; a warp's lane: lane + 32·i).
template <int N>
struct MergeOf {
  float m = -INFINITY, l = 0.0f;
  float a[N] = {};
  __device__ __forceinline__ void add(float m_c, float l_c, const float (&acc)[N]) {
    const float m_new = fmaxf(m, m_c);
    const float alpha = expf(__fsub_rn(m, m_new));  // 0 on the first chunk (exp(-inf))
    const float beta = expf(__fsub_rn(m_c, m_new));
    l = __fadd_rn(__fmul_rn(l, alpha), __fmul_rn(l_c, beta));
#pragma unroll
    for (int i = 0; i < N; ++i) a[i] = __fadd_rn(__fmul_rn(a[i], alpha), __fmul_rn(acc[i], beta));
    m = m_new;
  }
  // Adds the split shapes' stored partials of chunks 0 .. chunks - 1, in that
  // order: base[c·stride] = (m_c, l_c, a_c[0..hd)), read from L2.
  __device__ __forceinline__ void add_partials(const float* base, int chunks, int stride, int hd, int first,
                                               int step) {
    const float* pc = base;
    for (int c = 0; c < chunks; ++c, pc += stride) {
      float acc[N];
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int d = first + i * step;
        acc[i] = d < hd ? __ldcg(pc + 2 + d) : 0.0f;
      }
      add(__ldcg(pc), __ldcg(pc + 1), acc);
    }
  }
  // o_bf16, when not null, also gets each output rounded to bf16 (to_bf16's bits).
  __device__ __forceinline__ void store(float* o, uint16_t* o_bf16, int hd, int first, int step) const {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int d = first + i * step;
      if (d < hd) {
        const float v = __fdiv_rn(a[i], l);
        o[d] = v;
        if (o_bf16 != nullptr) o_bf16[d] = bf16_bits(v);
      }
    }
  }
};

// The block shapes' merge: thread t holds d = t, t + kThreads, ….
struct Merge : MergeOf<kDimsPerThread> {
  __device__ __forceinline__ void store(float* o, uint16_t* o_bf16, int hd) const {
    MergeOf<kDimsPerThread>::store(o, o_bf16, hd, threadIdx.x, kThreads);
  }
};

// attention_from_qkv's inputs: the qkv projection's partials and the
// rotation's (qkv_rope_kv_write's arguments).
struct QkvIn {
  const float* slabs;
  int slices;
  int64_t rows;
  const float* bias;
  const int32_t* rope_positions;
  const float* inv_freq;
  int rotary_dim;
  bool neox;
  bool prestage;  // the past keys' K/V rows queued before the wait (TANDEM_CUDA_ATTN_PRESTAGE)
  // Per row (host-copied, may be null: 0 for every row): how many rows before
  // it in this call are its sequence's — its keys at positions p − news[r] …
  // p − 1, rows r − news[r] … r − 1 (a verify block; ADR 0081).
  const int32_t* news;
};

// TANDEM_CUDA_ATTN_PRESTAGE (read once; a measurement): 0 stages attention_from_qkv's
// past K/V rows after the wait, as before. Never a bit of the result.
bool attention_prestage() {
  static const bool on = [] {
    const char* e = std::getenv("TANDEM_CUDA_ATTN_PRESTAGE");
    return e == nullptr || std::atoi(e) != 0;
  }();
  return on;
}

__device__ __forceinline__ int32_t first_chunk(const RowHead& rh) {
  return rh.lo / kAttentionChunk * kAttentionChunk;
}

__device__ __forceinline__ ChunkSlot chunk_slot(const RowHead& rh, int z) {
  ChunkSlot cs;
  const int32_t c_first = first_chunk(rh);
  cs.chunks = (rh.p - c_first) / kAttentionChunk + 1;
  cs.c0 = c_first + z * kAttentionChunk;
  cs.count = chunk_count(rh, cs.c0);
  return cs;
}

// Serial shape: one block per (row, head).
__global__ void __launch_bounds__(kThreads)
    attention_serial_kernel(const float* q, int n_heads, DeviceKvPool pool,
                            const int32_t* __restrict__ positions, const int32_t* __restrict__ block_tables,
                            int64_t table_stride, float scale, int window, float softcap,
                            float* __restrict__ out, uint16_t* __restrict__ out_bf16) {
  pdl_enter();
  __shared__ ChunkSmem sm;
  extern __shared__ __align__(16) float kv_s[];
  const int64_t r = blockIdx.x;
  const int head = blockIdx.y;
  const RowHead rh = row_head(n_heads, pool, positions, block_tables, table_stride, window, r, head);
  load_query(q, n_heads, pool, r, head, sm.q);
  Merge merge;
  for (int32_t c0 = first_chunk(rh); c0 <= rh.p; c0 += kAttentionChunk) {
    float m_c, l_c, acc[kDimsPerThread];
    chunk_partial(pool, rh, c0, scale, softcap, sm, kv_s, kv_s + kAttentionChunk * pool.head_dim, m_c, l_c,
                  acc);
    merge.add(m_c, l_c, acc);
  }
  const int64_t o = (r * n_heads + head) * pool.head_dim;
  merge.store(out + o, out_bf16 != nullptr ? out_bf16 + o : nullptr, pool.head_dim);
}

// Split shape: one block per (row, head, chunk slot z); slot z is chunk
// first_chunk + z of the row (blocks past the row's last chunk exit).
// Workspace: counters[rows·n_heads] (zero between calls: the merging block
// resets its own) and partials [rows·n_heads][slots][2 + head_dim]
// (m_c, l_c, a_c), in separate buffers, so that one call's partials can never
// land on the counters of the next (a first version shared one buffer and
// broke a verify block run after a decode step).
//
// kFromQkv (attention_from_qkv): q is not read; each block computes its
// head's query from the qkv projection's partials (`in`) as qkv_rope_kv_write
// does (qkv_values.cuh), and the k and v rows of the keys of its chunk that are
// new in this call — the row's own key and those of the rows before it of its
// sequence (in.news) — each from its own row's partials and rotation, used
// from shared memory instead of the pool; the block of each kv head's first q
// head also writes the row's own key to the pool. Every other key of the range
// is read from the pool (an earlier call wrote it).
template <bool kFromQkv>
__global__ void __launch_bounds__(kThreads)
    attention_split_kernel(const float* q, int n_heads, DeviceKvPool pool,
                           const int32_t* __restrict__ positions, const int32_t* __restrict__ block_tables,
                           int64_t table_stride, float scale, int window, float softcap, uint32_t* counters,
                           float* __restrict__ partials, int slots, float* __restrict__ out,
                           uint16_t* __restrict__ out_bf16, QkvIn in) {
  __shared__ ChunkSmem sm;
  __shared__ bool merges;
  __shared__ float cos_s[kFromQkv ? kMaxHeadDim / 2 : 1], sin_s[kFromQkv ? kMaxHeadDim / 2 : 1];
  extern __shared__ __align__(16) float kv_s[];
  const int64_t r = blockIdx.x;
  const int head = blockIdx.y;
  const int z = blockIdx.z;
  const int hd = pool.head_dim;
  // Before the wait (launch.cuh): the row's range and this chunk's key
  // offsets, from the positions and block tables alone, so the table lookups
  // overlap the previous kernel (ADR 0061). q and the K/V rows come after it.
  pdl_launch_dependents();
  const RowHead rh = row_head(n_heads, pool, positions, block_tables, table_stride, window, r, head);
  const ChunkSlot slot = chunk_slot(rh, z);
  const int chunks = slot.chunks;
  if (z >= chunks) {  // the whole block (rh is uniform); the launch contract: wait before exiting
    pdl_wait();
    return;
  }
  const int32_t c0 = slot.c0;
  const int count = slot.count;
  const int32_t chunk_last = chunk_first(rh, c0) + count - 1;
  stage_offsets(pool, rh, chunk_first(rh, c0), count, sm);
  float *k_s = kv_s, *v_s = kv_s + kAttentionChunk * hd;
  const bool own_key = kFromQkv && c0 + kAttentionChunk > rh.p;  // this chunk ends at p (uniform)
  // The chunk's keys new in this call (its last `fresh`; uniform): positions
  // p − news[r] … p of the range.
  int fresh = 0;
  if constexpr (kFromQkv) {
    const int32_t new_first = max(rh.p - (in.news != nullptr ? in.news[r] : 0), chunk_first(rh, c0));
    fresh = max(0, chunk_last - new_first + 1);
    rope_table(static_cast<float>(in.rope_positions[r]), in.inv_freq, in.rotary_dim / 2, cos_s, sin_s);
    // Every other key was written by an earlier call, whose kernels all
    // completed before this call's first one started (launch.cuh: the
    // row-input copy between them), so the chunk's K and V rows are queued
    // before the wait too; the new keys' slots are filled after it.
    if (in.prestage) {
      __syncthreads();  // sm.offset
      stage_rows_issue(pool, count - fresh, sm, k_s, v_s);
    }
  }
  pdl_wait();
  if constexpr (kFromQkv) {
    const int n_kv = pool.n_kv_heads;
    const int64_t width = static_cast<int64_t>(n_heads + 2 * n_kv) * hd;
    float* const own_k = k_s + (count - 1) * hd;
    float* const own_v = v_s + (count - 1) * hd;
    head_values<kSlabBatch>(in.slabs, in.slices, in.rows, width, in.bias, r, static_cast<int64_t>(head) * hd,
                            hd, sm.q);
    // Key count - fresh + j is row mate(j)'s own key (the last, with own_key, row r's).
    const auto mate = [&](int j) { return r - (rh.p - (chunk_last - fresh + 1 + j)); };
    for (int j = 0; j < fresh; ++j) {
      const int at = (count - fresh + j) * hd;
      head_values<kSlabBatch>(in.slabs, in.slices, in.rows, width, in.bias, mate(j),
                              static_cast<int64_t>(n_heads + rh.kv_head) * hd, hd, k_s + at);
      head_values<kSlabBatch>(in.slabs, in.slices, in.rows, width, in.bias, mate(j),
                              static_cast<int64_t>(n_heads + n_kv + rh.kv_head) * hd, hd, v_s + at);
    }
    __syncthreads();
    float* const rotate[2] = {sm.q, own_k};
    rope_rotate<kMaxHeadDim / 2 / kThreads>(rotate, own_key ? 2 : 1, in.rotary_dim / 2, in.neox, cos_s,
                                            sin_s);
    // The other rows' keys by their own rotations (rope_rotate ends with a
    // barrier: the tables are free to overwrite).
    for (int j = 0; j < fresh - (own_key ? 1 : 0); ++j) {
      rope_table(static_cast<float>(in.rope_positions[mate(j)]), in.inv_freq, in.rotary_dim / 2, cos_s,
                 sin_s);
      __syncthreads();
      float* const key[1] = {k_s + (count - fresh + j) * hd};
      rope_rotate<kMaxHeadDim / 2 / kThreads>(key, 1, in.rotary_dim / 2, in.neox, cos_s, sin_s);
    }
    if (own_key && head % (n_heads / n_kv) == 0) {  // one writer per (row, kv head)
      const int64_t at = sm.offset[count - 1];
      for (int d = threadIdx.x; d < hd; d += kThreads) {
        pool.k[at + d] = own_k[d];
        pool.v[at + d] = own_v[d];
      }
    }
  } else {
    load_query(q, n_heads, pool, r, head, sm.q);
  }
  const int64_t rh_index = r * n_heads + head;
  const int stride = 2 + hd;
  float* mine = partials + (rh_index * slots + z) * stride;
  {
    float m_c, l_c, acc[kDimsPerThread];
    chunk_partial(pool, rh, c0, scale, softcap, sm, k_s, v_s, m_c, l_c, acc, /*offsets_ready=*/true,
                  count - fresh, /*rows_issued=*/kFromQkv && in.prestage);
    if (chunks == 1) {  // the whole range in one chunk: the same merge, from the registers
      Merge merge;
      merge.add(m_c, l_c, acc);
      merge.store(out + rh_index * hd, out_bf16 != nullptr ? out_bf16 + rh_index * hd : nullptr, hd);
      return;
    }
    if (threadIdx.x == 0) {
      mine[0] = m_c;
      mine[1] = l_c;
    }
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int d = threadIdx.x + i * kThreads;
      if (d < hd) mine[2 + d] = acc[i];
    }
  }
  __threadfence();  // this block's partial is visible device-wide before it is counted
  __syncthreads();
  if (threadIdx.x == 0) merges = atomicAdd(&counters[rh_index], 1u) + 1 == static_cast<unsigned>(chunks);
  __syncthreads();
  if (!merges) return;
  __threadfence();
  Merge merge;
  merge.add_partials(partials + rh_index * slots * stride, chunks, stride, hd, threadIdx.x, kThreads);
  merge.store(out + rh_index * hd, out_bf16 != nullptr ? out_bf16 + rh_index * hd : nullptr, hd);
  if (threadIdx.x == 0) counters[rh_index] = 0;
}

// KV-split shape (ADR 0087): one block per (row, kv head, chunk slot z), warp
// w computing the partials of the kv head's q heads w, w + 4, … — the split
// shape's arithmetic for each head (the same partials, counters and merge, so
// the same bits), with the chunk's K and V rows staged once for the group
// instead of once per q head. A verify block of K rows then launches
// rows × kv heads × chunks blocks: one wave where the split shape's rows ×
// heads × chunks needed several (the 8B's K = 4 block at a 512-token context:
// 544 blocks instead of 2,176, against ~790 resident).
// Per head, in warp w: the scores of keys j = 0 … count − 1 (lane l sums
// q[d]·k[d] over d = l, l + 32, … by fma in order, the xor tree, s = scale ·
// dot: the split shape's per-key sum), m_c and l_c by the same loops, w_j by
// lane j, a_c[d] for d = l, l + 32, … by fma in key order; the merge of the
// (row, head)'s chunks by the warp that counts its last chunk.
constexpr int kWarps = kThreads / 32;
constexpr int kDimsPerLane = kMaxHeadDim / 32;
constexpr int kKeysAtOnce = 8;
static_assert(kAttentionChunk % kKeysAtOnce == 0, "the key groups tile a chunk");

__global__ void __launch_bounds__(kThreads)
    attention_kv_split_kernel(const float* q, int n_heads, DeviceKvPool pool,
                              const int32_t* __restrict__ positions, const int32_t* __restrict__ block_tables,
                              int64_t table_stride, float scale, int window, float softcap,
                              uint32_t* counters, float* __restrict__ partials, int slots,
                              float* __restrict__ out, uint16_t* __restrict__ out_bf16) {
  __shared__ ChunkSmem sm;  // its q, score and weight are unused: per-warp arrays below
  __shared__ float score_w[kWarps][kAttentionChunk], weight_w[kWarps][kAttentionChunk];
  extern __shared__ __align__(
      16) float kv_s[];  // K, V [32][head_dim] each, then the group's q [group][head_dim]
  const int64_t r = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int z = blockIdx.z;
  const int hd = pool.head_dim;
  const int group = n_heads / pool.n_kv_heads;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  pdl_launch_dependents();
  const RowHead rh =
      row_head(n_heads, pool, positions, block_tables, table_stride, window, r, kv_head * group);
  const ChunkSlot slot = chunk_slot(rh, z);
  const int chunks = slot.chunks;
  if (z >= chunks) {  // the whole block, as in the split shape
    pdl_wait();
    return;
  }
  const int32_t c0 = slot.c0;
  const int count = slot.count;
  stage_offsets(pool, rh, chunk_first(rh, c0), count, sm);
  float *k_s = kv_s, *v_s = kv_s + kAttentionChunk * hd, *q_s = kv_s + 2 * kAttentionChunk * hd;
  pdl_wait();
  {
    const float* qr = q + (r * n_heads + kv_head * group) * hd;  // the group's heads are adjacent
    for (int e = threadIdx.x; e < group * hd; e += kThreads) q_s[e] = qr[e];
  }
  __syncthreads();  // sm.offset
  stage_rows(pool, count, sm, k_s, v_s);
  __syncthreads();
  const int stride = 2 + hd;
  float* const score = score_w[warp];
  float* const weight = weight_w[warp];
  for (int g = warp; g < group; g += kWarps) {
    const int head = kv_head * group + g;
    const float* qh = q_s + g * hd;
    // Eight keys side by side (independent chains; rows past `count` lie
    // inside k_s and are computed, never stored), each key's sum as above.
    for (int j0 = 0; j0 < count; j0 += kKeysAtOnce) {
      float dot[kKeysAtOnce];
#pragma unroll
      for (int u = 0; u < kKeysAtOnce; ++u) dot[u] = 0.0f;
      for (int d = lane; d < hd; d += 32) {
        const float qd = qh[d];
#pragma unroll
        for (int u = 0; u < kKeysAtOnce; ++u) dot[u] = __fmaf_rn(qd, k_s[(j0 + u) * hd + d], dot[u]);
      }
#pragma unroll
      for (int u = 0; u < kKeysAtOnce; ++u) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) dot[u] = __fadd_rn(dot[u], __shfl_xor_sync(0xffffffffu, dot[u], o));
        float s = __fmul_rn(scale, dot[u]);
        if (softcap > 0.0f)
          s = __fmul_rn(tanhf(__fdiv_rn(s, softcap)), softcap);  // Gemma 2: tanh(s / cap) * cap
        if (lane == 0 && j0 + u < count) score[j0 + u] = s;
      }
    }
    __syncwarp();
    float mx = -INFINITY;
    for (int j = 0; j < count; ++j) mx = fmaxf(mx, score[j]);
    if (lane < count) weight[lane] = expf(__fsub_rn(score[lane], mx));
    __syncwarp();
    float sum = 0.0f;
    for (int j = 0; j < count; ++j) sum = __fadd_rn(sum, weight[j]);
    float acc[kDimsPerLane];
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane + i * 32;
      float a = 0.0f;
      if (d < hd) {
        for (int j = 0; j < count; ++j) a = __fmaf_rn(weight[j], v_s[j * hd + d], a);
      }
      acc[i] = a;
    }
    __syncwarp();  // score / weight are rewritten by the next head
    const int64_t rh_index = r * n_heads + head;
    if (chunks == 1) {  // the whole range in one chunk: the same merge, from the registers
      MergeOf<kDimsPerLane> merge;
      merge.add(mx, sum, acc);
      merge.store(out + rh_index * hd, out_bf16 != nullptr ? out_bf16 + rh_index * hd : nullptr, hd, lane,
                  32);
      continue;
    }
    float* mine = partials + (rh_index * slots + z) * stride;
    if (lane == 0) {
      mine[0] = mx;
      mine[1] = sum;
    }
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane + i * 32;
      if (d < hd) mine[2 + d] = acc[i];
    }
    __threadfence();  // this warp's partial is visible device-wide before it is counted
    __syncwarp();
    unsigned ticket = 0;
    if (lane == 0) ticket = atomicAdd(&counters[rh_index], 1u) + 1;
    ticket = __shfl_sync(0xffffffffu, ticket, 0);
    if (ticket != static_cast<unsigned>(chunks)) continue;
    __threadfence();
    MergeOf<kDimsPerLane> merge;
    merge.add_partials(partials + rh_index * slots * stride, chunks, stride, hd, lane, 32);
    merge.store(out + rh_index * hd, out_bf16 != nullptr ? out_bf16 + rh_index * hd : nullptr, hd, lane, 32);
    if (lane == 0) counters[rh_index] = 0;
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// TANDEM_CUDA_ATTENTION=serial|split|kvsplit|tile replaces `automatic` (read once; for
// measurements: every shape gives the same bits).
AttentionShape environment_shape() {
  static const AttentionShape shape = [] {
    const char* e = std::getenv("TANDEM_CUDA_ATTENTION");
    const std::string v = e != nullptr ? e : "";
    if (v == "serial") return AttentionShape::serial;
    if (v == "split") return AttentionShape::split;
    if (v == "tile") return AttentionShape::tile;
    if (v == "kvsplit") return AttentionShape::kv_split;
    return AttentionShape::automatic;
  }();
  return shape;
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
  return launch_kernel("kv_write", kv_write_kernel, dim3(static_cast<unsigned>(rows)), dim3(256), 0,
                       stream.handle(), pool, k_new, v_new, positions, block_tables, table_stride);
}

namespace {

// Chunk slots per row the split shape provides: enough for any row whose
// table has table_stride blocks (and, with a window, for its key range).
int64_t split_slots(const DeviceKvPool& pool, int64_t table_stride, int window) {
  int64_t slots = (table_stride * pool.tokens_per_block + kAttentionChunk - 1) / kAttentionChunk;
  if (window > 0) slots = std::min<int64_t>(slots, (window + kAttentionChunk - 2) / kAttentionChunk + 1);
  return std::max<int64_t>(slots, 1);
}

Status check_attention(const DeviceKvPool& pool, int n_heads, int64_t rows, int64_t table_stride,
                       const AttentionWorkspace& workspace, const char* op) {
  TANDEM_RETURN_IF_ERROR(check_pool(pool, op));
  if (n_heads <= 0 || n_heads % pool.n_kv_heads != 0 || n_heads > 65535) {
    return invalid_argument(std::string(op) +
                            ": n_heads must be a positive multiple of n_kv_heads, at most 65535 (got " +
                            std::to_string(n_heads) + " and " + std::to_string(pool.n_kv_heads) + ")");
  }
  if (rows < 0 || rows > 0x7fffffffLL || table_stride < 0)
    return invalid_argument(std::string(op) + ": need 0 <= rows < 2^31 and table_stride >= 0");
  if (workspace.partials != nullptr && (reinterpret_cast<uintptr_t>(workspace.partials) & 15u) != 0)
    return invalid_argument(std::string(op) + ": the workspace's partials must be 16-byte aligned");
  return Status::Ok();
}

// The chunk's K and V rows (dynamic shared memory of both shapes).
int chunk_smem(const DeviceKvPool& pool) {
  return 2 * kAttentionChunk * pool.head_dim * static_cast<int>(sizeof(float));
}

Status allow_smem(const void* kernel, int smem) {
  if (smem <= 48 * 1024) return Status::Ok();
  return cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                     "cudaFuncSetAttribute(attention, " + std::to_string(smem) + " bytes of shared memory)");
}

// Whether the workspace holds the split shape's partials and counters.
bool split_fits(int64_t rows, int n_heads, const DeviceKvPool& pool, int64_t table_stride, int window,
                const AttentionWorkspace& workspace, int64_t slots) {
  return workspace.partials != nullptr && workspace.counters != nullptr && slots <= 65535 &&
         workspace.counter_count >= static_cast<size_t>(rows) * n_heads &&
         workspace.partial_floats >= attention_partial_floats(rows, n_heads, pool, table_stride, window);
}

template <bool kFromQkv>
Status launch_split(const Stream& stream, const float* q, int64_t rows, int n_heads, const DeviceKvPool& pool,
                    const int32_t* positions, const int32_t* block_tables, int64_t table_stride, float scale,
                    int window, float softcap, const AttentionWorkspace& workspace, int64_t slots, float* out,
                    uint16_t* out_bf16, const QkvIn& in) {
  const int smem = chunk_smem(pool);
  TANDEM_RETURN_IF_ERROR(allow_smem(reinterpret_cast<const void*>(attention_split_kernel<kFromQkv>), smem));
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(n_heads), static_cast<unsigned>(slots));
  return launch_kernel(kFromQkv ? "attention (split, from qkv)" : "attention (split)",
                       attention_split_kernel<kFromQkv>, grid, dim3(kThreads), smem, stream.handle(), q,
                       n_heads, pool, positions, block_tables, table_stride, scale, window, softcap,
                       workspace.counters, workspace.partials, static_cast<int>(slots), out, out_bf16, in);
}

// The KV-split shape's dynamic shared memory: the chunk's K and V rows, then the group's queries.
int kv_split_smem(const DeviceKvPool& pool, int n_heads) {
  return chunk_smem(pool) + n_heads / pool.n_kv_heads * pool.head_dim * static_cast<int>(sizeof(float));
}

Status launch_kv_split(const Stream& stream, const float* q, int64_t rows, int n_heads,
                       const DeviceKvPool& pool, const int32_t* positions, const int32_t* block_tables,
                       int64_t table_stride, float scale, int window, float softcap,
                       const AttentionWorkspace& workspace, int64_t slots, float* out, uint16_t* out_bf16) {
  const int smem = kv_split_smem(pool, n_heads);
  TANDEM_RETURN_IF_ERROR(allow_smem(reinterpret_cast<const void*>(attention_kv_split_kernel), smem));
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(pool.n_kv_heads),
                  static_cast<unsigned>(slots));
  return launch_kernel("attention (kv split)", attention_kv_split_kernel, grid, dim3(kThreads), smem,
                       stream.handle(), q, n_heads, pool, positions, block_tables, table_stride, scale,
                       window, softcap, workspace.counters, workspace.partials, static_cast<int>(slots), out,
                       out_bf16);
}

// TANDEM_CUDA_KV_SPLIT_ROWS (read once; never a bit of the result): the
// automatic shape takes the KV-split kernel for calls of at least this many
// rows (verify blocks, batched decode steps) that would take the split one;
// 0 never. Default 2 (ADR 0087, measured on an H100: the 8B's K = 4 verify
// block 1.13x -> 1.05x a step, a batch of 8 7.16 ms a step against 8.06; the
// one-row step the same either way, so it keeps the split shape). The value
// is parsed as gpu_knobs.cpp validates it (trimmed; start-up refuses anything else).
constexpr int64_t kKvSplitMinRows = 2;
int64_t kv_split_min_rows() {
  static const int64_t rows = [] {
    const std::optional<std::string> e = env_string("TANDEM_CUDA_KV_SPLIT_ROWS");
    const std::optional<int64_t> v = e ? parse_int(*e) : std::nullopt;
    return v && *v >= 0 && *v <= 65535 ? *v : kKvSplitMinRows;
  }();
  return rows;
}

}  // namespace

size_t attention_partial_floats(int64_t rows, int n_heads, const DeviceKvPool& pool, int64_t table_stride,
                                int window) {
  if (rows <= 0 || n_heads <= 0 || pool.head_dim <= 0 || pool.tokens_per_block <= 0 || table_stride <= 0)
    return 0;
  const size_t slots = static_cast<size_t>(split_slots(pool, table_stride, window));
  return static_cast<size_t>(rows) * n_heads * slots * (2 + static_cast<size_t>(pool.head_dim));
}

Status attention(const Stream& stream, const float* q, int64_t rows, int n_heads, const DeviceKvPool& pool,
                 const int32_t* positions, const int32_t* block_tables, int64_t table_stride, float scale,
                 int window, float* out, const AttentionWorkspace& workspace, float softcap,
                 AttentionShape shape, uint16_t* out_bf16) {
  TANDEM_RETURN_IF_ERROR(check_attention(pool, n_heads, rows, table_stride, workspace, "attention"));
  if (rows == 0) return Status::Ok();
  if (shape == AttentionShape::automatic) shape = environment_shape();
  const bool tile_ok = softcap == 0.0f && rows <= 65535 && attention_tile_fits(n_heads, pool) &&
                       aligned16(q) && aligned16(out) && aligned16(pool.k) && aligned16(pool.v);
  if (tile_ok && (shape == AttentionShape::tile ||
                  (shape == AttentionShape::automatic && rows > kAttentionTileMinRows))) {
    TANDEM_RETURN_IF_ERROR(attention_tile(stream, q, rows, n_heads, pool, positions, block_tables,
                                          table_stride, scale, window, out));
    // The tile shape (prefill rows) keeps its epilogue: the bf16 copy is a separate pass.
    return out_bf16 != nullptr ? to_bf16(stream, out, out_bf16, rows * n_heads * pool.head_dim)
                               : Status::Ok();
  }
  const int64_t slots = split_slots(pool, std::max<int64_t>(table_stride, 1), window);
  const bool split = shape != AttentionShape::serial &&
                     split_fits(rows, n_heads, pool, table_stride, window, workspace, slots);
  if (split &&
      (shape == AttentionShape::kv_split ||
       (shape == AttentionShape::automatic && kv_split_min_rows() > 0 && rows >= kv_split_min_rows()))) {
    return launch_kv_split(stream, q, rows, n_heads, pool, positions, block_tables, table_stride, scale,
                           window, softcap, workspace, slots, out, out_bf16);
  }
  if (split) {
    return launch_split<false>(stream, q, rows, n_heads, pool, positions, block_tables, table_stride, scale,
                               window, softcap, workspace, slots, out, out_bf16, QkvIn{});
  }
  const int smem = chunk_smem(pool);
  TANDEM_RETURN_IF_ERROR(allow_smem(reinterpret_cast<const void*>(attention_serial_kernel), smem));
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(n_heads));
  return launch_kernel("attention", attention_serial_kernel, grid, dim3(kThreads), smem, stream.handle(), q,
                       n_heads, pool, positions, block_tables, table_stride, scale, window, softcap, out,
                       out_bf16);
}

Status attention_from_qkv(const Stream& stream, const GemmPartials& qkv, const float* bias, int n_heads,
                          const DeviceKvPool& pool, const int32_t* rope_positions, const float* inv_freq,
                          int rotary_dim, RopeLayout layout, const int32_t* positions,
                          const int32_t* block_tables, int64_t table_stride, float scale, int window,
                          float* out, const AttentionWorkspace& workspace, float* q_fallback, float softcap,
                          uint16_t* out_bf16, const int32_t* news) {
  TANDEM_RETURN_IF_ERROR(
      check_attention(pool, n_heads, qkv.m, table_stride, workspace, "attention_from_qkv"));
  if (qkv.slabs == nullptr && qkv.m > 0) return invalid_argument("attention_from_qkv: no partials");
  if (qkv.slices < 1 || rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > pool.head_dim ||
      qkv.n != static_cast<int64_t>(n_heads + 2 * pool.n_kv_heads) * pool.head_dim) {
    return invalid_argument(
        "attention_from_qkv: need n = (n_heads + 2 n_kv_heads) * head_dim, slices >= 1 and "
        "rotary_dim even and <= head_dim (got n=" +
        std::to_string(qkv.n) + ", slices=" + std::to_string(qkv.slices) +
        ", rotary_dim=" + std::to_string(rotary_dim) + ")");
  }
  if (qkv.m == 0) return Status::Ok();
  const int64_t slots = split_slots(pool, std::max<int64_t>(table_stride, 1), window);
  const AttentionShape shape = environment_shape();
  if (!split_fits(qkv.m, n_heads, pool, table_stride, window, workspace, slots) ||
      shape == AttentionShape::serial || shape == AttentionShape::tile) {
    if (q_fallback == nullptr)
      return invalid_argument(
          "attention_from_qkv: the split shape cannot run (workspace, TANDEM_CUDA_ATTENTION) "
          "and there is no q buffer to fall back on");
    TANDEM_RETURN_IF_ERROR(qkv_rope_kv_write(stream, qkv, bias, n_heads, pool, rope_positions, inv_freq,
                                             rotary_dim, layout, positions, block_tables, table_stride,
                                             q_fallback));
    return attention(stream, q_fallback, qkv.m, n_heads, pool, positions, block_tables, table_stride, scale,
                     window, out, workspace, softcap, AttentionShape::automatic, out_bf16);
  }
  const QkvIn in{qkv.slabs,
                 qkv.slices,
                 qkv.m,
                 bias,
                 rope_positions,
                 inv_freq,
                 rotary_dim,
                 layout == RopeLayout::neox,
                 attention_prestage(),
                 news};
  return launch_split<true>(stream, nullptr, qkv.m, n_heads, pool, positions, block_tables, table_stride,
                            scale, window, softcap, workspace, slots, out, out_bf16, in);
}

}  // namespace tandem::kernels::gpu
