// attention_tile.cu — the tile shape of the device attention (ADR 0043):
// one block per (tile of query rows, kv head) loads each absolute 32-key
// chunk's K/V into shared memory once for all the queries of the tile (rows
// × the heads of the kv head's group) and gives every query the bits of the
// per-(row, head) shapes of attention.cu. For each query and chunk it does
// that file's arithmetic exactly:
//   score: dot = the xor-tree sum over lanes l = 0..31 of the fma chain over
//     d = l, l + 32, … (each lane's chain is one leaf; the tree is evaluated
//     with the same pairings: level o = 16, 8, 4, 2, 1 adds leaf sets l and
//     l ^ o); s = scale · dot;
//   m_c = max of the chunk's scores (max is exact, so order-free; the sign of
//     a zero maximum cannot reach the output), w_j = exp(s_j − m_c),
//     l_c = Σ w_j in key order, a_c[d] = Σ w_j·v_j[d] by fma in key order
//     (keys outside the query's range are skipped, not weighted by zero);
//   the merge in chunk order, the same formula as Merge::add, out = A / L.
// Rows of a tile share K/V only if their block tables map every position
// they read to the same blocks (checked in the kernel); otherwise the tile
// runs one pass per row with that row's table — the same bits, slower.
// Tested bitwise against the serial and split shapes
// (tests/kernels/cuda/attention_tile_test.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/attention_tile.h"
#include "cuda/cuda_check.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kTileThreads = 256;
constexpr int kKeys = kAttentionChunk;  // 32

// Query slots per block: 64 at head_dim 128, else 32 (64 spills at 64 and 256). A slot is (row of
// the tile, head of the group): slot = row · group + head.
template <int HD>
struct TileShape {
  static constexpr int P = HD == 128 ? 64 : 32;
  static constexpr int L = HD / 32;    // fma chain length of one lane (leaf)
  static constexpr int KS = HD + 4;    // padded row stride of q_s / k_s (leaf-major layout)
  static constexpr int QS = P / 32;    // score phase: query slots per thread (× 4 keys)
  static constexpr int NQ = P / 16;    // PV phase: query slots per thread
  static constexpr int ND4 = HD / 64;  // PV phase: float4 units of d per thread
  static constexpr int kSmemFloats = P * KS + kKeys * KS + kKeys * HD + kKeys * P + P + P * HD;
  static constexpr int kSmem = kSmemFloats * 4 + P * 3 * 4;
  static_assert(HD % 64 == 0 && P % 32 == 0, "shape");
};

// Leaf-major position of element d of a row: lane l's chain d = l, l + 32, …
// is contiguous.
template <int L>
__device__ __forceinline__ int leaf_major(int d) {
  return (d & 31) * L + (d >> 5);
}

__device__ __forceinline__ int64_t kv_index(const DeviceKvPool& pool, const int32_t* table, int32_t position,
                                            int kv_head) {
  const int32_t block = table[position / pool.tokens_per_block];
  const int32_t slot = position % pool.tokens_per_block;
  return ((static_cast<int64_t>(block) * pool.tokens_per_block + slot) * pool.n_kv_heads + kv_head) *
         pool.head_dim;
}

template <int L>
__device__ __forceinline__ void load_leaf(const float* p, float (&v)[L]) {
  if constexpr (L % 4 == 0) {
#pragma unroll
    for (int i = 0; i < L; i += 4) {
      const float4 f = *reinterpret_cast<const float4*>(p + i);
      v[i] = f.x;
      v[i + 1] = f.y;
      v[i + 2] = f.z;
      v[i + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < L; i += 2) {
      const float2 f = *reinterpret_cast<const float2*>(p + i);
      v[i] = f.x;
      v[i + 1] = f.y;
    }
  }
}

// The partial dot products of the thread's QS query slots × 4 keys for the
// leaf set of tree node (LEVEL, LANE): LEVEL 0 is lane LANE's fma chain;
// node (k, l) = node (k − 1, l) + node (k − 1, l ^ (32 >> k)), as the xor
// shuffles of attention.cu's chunk_partial pair the lanes.
template <int HD, int LEVEL, int LANE>
__device__ __forceinline__ void dot_tree(const float* q_s, const float* k_s, int q0, int kb,
                                         float (&out)[TileShape<HD>::QS][4]) {
  using S = TileShape<HD>;
  if constexpr (LEVEL == 0) {
    float qv[S::QS][S::L], kv[4][S::L];
#pragma unroll
    for (int t = 0; t < S::QS; ++t) load_leaf<S::L>(q_s + (q0 + t) * S::KS + LANE * S::L, qv[t]);
#pragma unroll
    for (int i = 0; i < 4; ++i) load_leaf<S::L>(k_s + (kb + 8 * i) * S::KS + LANE * S::L, kv[i]);
#pragma unroll
    for (int t = 0; t < S::QS; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < S::L; ++e) dot = __fmaf_rn(qv[t][e], kv[i][e], dot);
        out[t][i] = dot;
      }
  } else {
    float a[S::QS][4], b[S::QS][4];
    dot_tree<HD, LEVEL - 1, LANE>(q_s, k_s, q0, kb, a);
    dot_tree<HD, LEVEL - 1, (LANE ^ (32 >> LEVEL))>(q_s, k_s, q0, kb, b);
#pragma unroll
    for (int t = 0; t < S::QS; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) out[t][i] = __fadd_rn(a[t][i], b[t][i]);
  }
}

// Per query slot of the block (shared): position p, window start lo, and
// whether the slot takes part in the current pass.
struct SlotInfo {
  int32_t* p;
  int32_t* lo;
  int32_t* on;
};

template <int HD>
__device__ __forceinline__ bool key_valid(const SlotInfo& si, int slot, int32_t key) {
  return si.on[slot] != 0 && key >= si.lo[slot] && key <= si.p[slot];
}

// Whether some slot of the pass reads key `key`.
template <int P>
__device__ __forceinline__ bool covered(const SlotInfo& si, int32_t key) {
  for (int slot = 0; slot < P; ++slot)
    if (si.on[slot] != 0 && key >= si.lo[slot] && key <= si.p[slot]) return true;
  return false;
}

// The chunk's K (leaf-major) and V for the keys some slot reads — the
// table's row reads [ref_lo, p_max]; below ref_lo only keys a slot covers,
// whose blocks the tables were checked to agree on — zeros elsewhere.
template <int HD>
__device__ __forceinline__ void load_chunk(const DeviceKvPool& pool, const int32_t* table, int kv_head,
                                           int32_t c0, int32_t lo_min, int32_t p_max, int32_t ref_lo,
                                           const SlotInfo& si, float* k_s, float* v_s) {
  using S = TileShape<HD>;
  for (int i = threadIdx.x; i < kKeys * (HD / 4); i += kTileThreads) {
    const int j = i / (HD / 4), d = (i % (HD / 4)) * 4;
    const int32_t key = c0 + j;
    float4 kf = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vf = kf;
    if (key >= lo_min && key <= p_max && (key >= ref_lo || covered<S::P>(si, key))) {
      const int64_t off = kv_index(pool, table, key, kv_head) + d;
      kf = *reinterpret_cast<const float4*>(pool.k + off);
      vf = *reinterpret_cast<const float4*>(pool.v + off);
    }
    float* kd = k_s + j * S::KS;
    kd[leaf_major<S::L>(d)] = kf.x;
    kd[leaf_major<S::L>(d + 1)] = kf.y;
    kd[leaf_major<S::L>(d + 2)] = kf.z;
    kd[leaf_major<S::L>(d + 3)] = kf.w;
    *reinterpret_cast<float4*>(v_s + j * HD + d) = vf;
  }
}

// Scores of the thread's slots q0 .. q0 + QS − 1 × keys kb + 8i, each slot's
// maximum over its valid keys of the chunk (mx_s), the weights (w_s[key][slot],
// 0 for keys outside the slot's range).
template <int HD>
__device__ __forceinline__ void chunk_weights(const float* q_s, const float* k_s, int q0, int kb, int32_t c0,
                                              float scale, const SlotInfo& si, float* w_s, float* mx_s) {
  using S = TileShape<HD>;
  float s[S::QS][4];
  dot_tree<HD, 5, 0>(q_s, k_s, q0, kb, s);
#pragma unroll
  for (int t = 0; t < S::QS; ++t) {
    const int slot = q0 + t;
    float mx = -INFINITY;
    bool valid[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[t][i] = __fmul_rn(scale, s[t][i]);
      valid[i] = key_valid<HD>(si, slot, c0 + kb + 8 * i);
      if (valid[i]) mx = fmaxf(mx, s[t][i]);
    }
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w_s[(kb + 8 * i) * S::P + slot] = valid[i] ? expf(__fsub_rn(s[t][i], mx)) : 0.0f;
    if (kb == 0) mx_s[slot] = mx;
  }
}

// l_c and a_c of the thread's slots pq0 .. pq0 + NQ − 1 (d in float4 units
// dg + 16u): keys in order, a key skipped where the slot's mask bit is clear
// (MASKED; chunk_partial's loops over [first, last]).
template <int HD, bool MASKED>
__device__ __forceinline__ void chunk_values(const float* w_s, const float* v_s, int pq0, int dg,
                                             const uint32_t (&mask)[TileShape<HD>::NQ],
                                             float (&sum)[TileShape<HD>::NQ],
                                             float (&acc)[TileShape<HD>::NQ][TileShape<HD>::ND4][4]) {
  using S = TileShape<HD>;
#pragma unroll
  for (int t = 0; t < S::NQ; ++t) {
    sum[t] = 0.0f;
#pragma unroll
    for (int u = 0; u < S::ND4; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[t][u][e] = 0.0f;
  }
#pragma unroll 4
  for (int j = 0; j < kKeys; ++j) {
    float w[S::NQ];
#pragma unroll
    for (int t = 0; t < S::NQ; ++t) w[t] = w_s[j * S::P + pq0 + t];
#pragma unroll
    for (int u = 0; u < S::ND4; ++u) {
      const float4 v = *reinterpret_cast<const float4*>(v_s + j * HD + (dg + 16 * u) * 4);
#pragma unroll
      for (int t = 0; t < S::NQ; ++t) {
        if (!MASKED || ((mask[t] >> j) & 1u)) {
          acc[t][u][0] = __fmaf_rn(w[t], v.x, acc[t][u][0]);
          acc[t][u][1] = __fmaf_rn(w[t], v.y, acc[t][u][1]);
          acc[t][u][2] = __fmaf_rn(w[t], v.z, acc[t][u][2]);
          acc[t][u][3] = __fmaf_rn(w[t], v.w, acc[t][u][3]);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < S::NQ; ++t)
      if (!MASKED || ((mask[t] >> j) & 1u)) sum[t] = __fadd_rn(sum[t], w[t]);
  }
}

// One merge step per slot with a key in the chunk: Merge::add of attention.cu
// on the running (m, l) in registers and A in a_s.
template <int HD>
__device__ __forceinline__ void merge_chunk(const float* mx_s, float* a_s, int pq0, int dg,
                                            const uint32_t (&mask)[TileShape<HD>::NQ],
                                            const float (&sum)[TileShape<HD>::NQ],
                                            const float (&acc)[TileShape<HD>::NQ][TileShape<HD>::ND4][4],
                                            float (&run_m)[TileShape<HD>::NQ],
                                            float (&run_l)[TileShape<HD>::NQ]) {
  using S = TileShape<HD>;
#pragma unroll
  for (int t = 0; t < S::NQ; ++t) {
    if (mask[t] == 0) continue;  // no key of this chunk for the slot: no merge step
    const float m_c = mx_s[pq0 + t];
    const float m_new = fmaxf(run_m[t], m_c);
    const float alpha = expf(__fsub_rn(run_m[t], m_new));  // 0 on the first chunk (exp(-inf))
    const float beta = expf(__fsub_rn(m_c, m_new));
    run_l[t] = __fadd_rn(__fmul_rn(run_l[t], alpha), __fmul_rn(sum[t], beta));
#pragma unroll
    for (int u = 0; u < S::ND4; ++u) {
      float4* a = reinterpret_cast<float4*>(a_s + (pq0 + t) * HD + (dg + 16 * u) * 4);
      float4 r = *a;
      r.x = __fadd_rn(__fmul_rn(r.x, alpha), __fmul_rn(acc[t][u][0], beta));
      r.y = __fadd_rn(__fmul_rn(r.y, alpha), __fmul_rn(acc[t][u][1], beta));
      r.z = __fadd_rn(__fmul_rn(r.z, alpha), __fmul_rn(acc[t][u][2], beta));
      r.w = __fadd_rn(__fmul_rn(r.w, alpha), __fmul_rn(acc[t][u][3], beta));
      *a = r;
    }
    run_m[t] = m_new;
  }
}

// One pass over the chunks for the slots with si.on set, all reading K/V
// through `table` (rows whose tables agree on every position they read).
template <int HD>
__device__ void tile_pass(const float* q, int n_heads, int group, const DeviceKvPool& pool,
                          const int32_t* table, int64_t r0, int kv_head, float scale, float* smem,
                          const SlotInfo& si, int32_t lo_min, int32_t p_max, int32_t ref_lo,
                          float* __restrict__ out) {
  using S = TileShape<HD>;
  float* q_s = smem;
  float* k_s = q_s + S::P * S::KS;
  float* v_s = k_s + kKeys * S::KS;
  float* w_s = v_s + kKeys * HD;  // [key][slot]
  float* mx_s = w_s + kKeys * S::P;
  float* a_s = mx_s + S::P;  // the running A of each slot, [slot][HD] (each element owned by one thread)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  // The queries, leaf-major (zeros for slots not in the pass).
  for (int i = threadIdx.x; i < S::P * (HD / 4); i += kTileThreads) {
    const int slot = i / (HD / 4), d = (i % (HD / 4)) * 4;
    float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (si.on[slot]) {
      const int64_t row = r0 + slot / group;
      const int head = kv_head * group + slot % group;
      f = *reinterpret_cast<const float4*>(q + (row * n_heads + head) * HD + d);
    }
    float* dst = q_s + slot * S::KS;
    dst[leaf_major<S::L>(d)] = f.x;
    dst[leaf_major<S::L>(d + 1)] = f.y;
    dst[leaf_major<S::L>(d + 2)] = f.z;
    dst[leaf_major<S::L>(d + 3)] = f.w;
  }

  // Score phase: slots q0 .. q0 + QS − 1 × keys kb + 8i. PV phase: slots
  // pq0 .. pq0 + NQ − 1 × d in float4 units dg + 16j.
  const int q0 = (warp * 4 + (lane >> 3)) * S::QS, kb = lane & 7;
  const int pq0 = (warp * 2 + (lane >> 4)) * S::NQ, dg = lane & 15;
  float run_m[S::NQ], run_l[S::NQ];
#pragma unroll
  for (int t = 0; t < S::NQ; ++t) {
    run_m[t] = -INFINITY;
    run_l[t] = 0.0f;
#pragma unroll
    for (int u = 0; u < S::ND4; ++u)
      *reinterpret_cast<float4*>(a_s + (pq0 + t) * HD + (dg + 16 * u) * 4) =
          make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  for (int32_t c0 = lo_min / kKeys * kKeys; c0 <= p_max; c0 += kKeys) {
    __syncthreads();  // the previous chunk's readers are done (and q_s is written)
    load_chunk<HD>(pool, table, kv_head, c0, lo_min, p_max, ref_lo, si, k_s, v_s);
    __syncthreads();
    chunk_weights<HD>(q_s, k_s, q0, kb, c0, scale, si, w_s, mx_s);
    __syncthreads();
    // The keys of the chunk each of the thread's slots reads, as a mask.
    bool full = true;
    uint32_t mask[S::NQ];
#pragma unroll
    for (int t = 0; t < S::NQ; ++t) {
      const int slot = pq0 + t;
      mask[t] = 0;
      if (si.on[slot]) {
        const int32_t first = max(si.lo[slot], c0), last = min(si.p[slot], c0 + kKeys - 1);
        if (first <= last) {
          const int n = last - first + 1, shift = first - c0;
          mask[t] = (n == 32 ? 0xffffffffu : ((1u << n) - 1u)) << shift;
        }
      }
      full = full && mask[t] == 0xffffffffu;
    }
    float acc[S::NQ][S::ND4][4], sum[S::NQ];
    if (full) {
      chunk_values<HD, false>(w_s, v_s, pq0, dg, mask, sum, acc);
    } else {
      chunk_values<HD, true>(w_s, v_s, pq0, dg, mask, sum, acc);
    }
    merge_chunk<HD>(mx_s, a_s, pq0, dg, mask, sum, acc, run_m, run_l);
  }

#pragma unroll
  for (int t = 0; t < S::NQ; ++t) {
    const int slot = pq0 + t;
    if (!si.on[slot]) continue;
    const int64_t row = r0 + slot / group;
    const int head = kv_head * group + slot % group;
    float* o = out + (row * n_heads + head) * HD;
#pragma unroll
    for (int u = 0; u < S::ND4; ++u) {
      float4 r = *reinterpret_cast<const float4*>(a_s + slot * HD + (dg + 16 * u) * 4);
      r.x = __fdiv_rn(r.x, run_l[t]);
      r.y = __fdiv_rn(r.y, run_l[t]);
      r.z = __fdiv_rn(r.z, run_l[t]);
      r.w = __fdiv_rn(r.w, run_l[t]);
      *reinterpret_cast<float4*>(o + (dg + 16 * u) * 4) = r;
    }
  }
}

// Grid (n_kv_heads, tiles): tiles in reverse order, so the last rows of a
// causal prefill (the most keys) start first.
template <int HD>
__global__ void __launch_bounds__(kTileThreads, 2)
    attention_tile_kernel(const float* q, int64_t rows, int n_heads, DeviceKvPool pool,
                          const int32_t* __restrict__ positions, const int32_t* __restrict__ block_tables,
                          int64_t table_stride, float scale, int window, float* __restrict__ out) {
  using S = TileShape<HD>;
  extern __shared__ __align__(16) float smem[];
  __shared__ int32_t s_ref, s_uniform, s_lo_min, s_p_max, s_ref_lo;
  const int group = n_heads / pool.n_kv_heads;
  const int tile_rows = S::P / group;
  const int kv_head = blockIdx.x;
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;
  const int64_t r0 = tile * tile_rows;
  const int nr = rows - r0 < tile_rows ? static_cast<int>(rows - r0) : tile_rows;
  SlotInfo si;
  si.p = reinterpret_cast<int32_t*>(smem + S::kSmemFloats);
  si.lo = si.p + S::P;
  si.on = si.lo + S::P;

  // The tile's rows: one table for all (the row with the largest position)
  // if every row's table agrees with it on the blocks the row reads.
  if (threadIdx.x == 0) {
    int ref = 0;
    int32_t lo_min = 0x7fffffff, p_max = -1, ref_lo = 0;
    for (int i = 0; i < nr; ++i) {
      const int32_t p = positions[r0 + i];
      const int32_t lo = window > 0 ? max(0, p - window + 1) : 0;
      if (p > p_max) {
        p_max = p;
        ref = i;
        ref_lo = lo;
      }
      lo_min = min(lo_min, lo);
    }
    s_ref = ref;
    s_lo_min = lo_min;
    s_p_max = p_max;
    s_ref_lo = ref_lo;
    s_uniform = 1;
  }
  __syncthreads();
  const int32_t* ref_table = block_tables + (r0 + s_ref) * table_stride;
  for (int i = 0; i < nr; ++i) {
    if (i == s_ref) continue;
    const int32_t p = positions[r0 + i];
    const int32_t lo = window > 0 ? max(0, p - window + 1) : 0;
    const int32_t* t = block_tables + (r0 + i) * table_stride;
    for (int32_t b = lo / pool.tokens_per_block + threadIdx.x; b <= p / pool.tokens_per_block;
         b += kTileThreads)
      if (t[b] != ref_table[b]) s_uniform = 0;  // benign race: every writer stores 0
  }
  __syncthreads();
  const bool uniform = s_uniform != 0;

  for (int pass = 0; pass < (uniform ? 1 : nr); ++pass) {
    for (int slot = threadIdx.x; slot < S::P; slot += kTileThreads) {
      const int i = slot / group;
      const bool on = slot < tile_rows * group && i < nr && (uniform || i == pass);
      const int32_t p = on ? positions[r0 + i] : -1;
      si.p[slot] = p;
      si.lo[slot] = on && window > 0 ? max(0, p - window + 1) : 0;
      si.on[slot] = on ? 1 : 0;
    }
    int32_t lo_min = s_lo_min, p_max = s_p_max, ref_lo = s_ref_lo;
    const int32_t* table = ref_table;
    if (!uniform) {
      p_max = positions[r0 + pass];
      lo_min = window > 0 ? max(0, p_max - window + 1) : 0;
      ref_lo = lo_min;
      table = block_tables + (r0 + pass) * table_stride;
    }
    __syncthreads();  // the slot info is visible (and the previous pass is done with it)
    tile_pass<HD>(q, n_heads, group, pool, table, r0, kv_head, scale, smem, si, lo_min, p_max, ref_lo, out);
    __syncthreads();
  }
}

template <int HD>
Status launch_tile(const Stream& stream, const float* q, int64_t rows, int n_heads, const DeviceKvPool& pool,
                   const int32_t* positions, const int32_t* block_tables, int64_t table_stride, float scale,
                   int window, float* out) {
  using S = TileShape<HD>;
  const int group = n_heads / pool.n_kv_heads;
  const int tile_rows = S::P / group;
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
  if (tiles > 65535) return invalid_argument("attention (tile): too many rows for one launch");
  const auto kernel = attention_tile_kernel<HD>;
  TANDEM_RETURN_IF_ERROR(
      cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem),
                  "cudaFuncSetAttribute(attention tile, " + std::to_string(S::kSmem) + " bytes)"));
  const dim3 grid(static_cast<unsigned>(pool.n_kv_heads), static_cast<unsigned>(tiles));
  kernel<<<grid, kTileThreads, S::kSmem, stream.handle()>>>(q, rows, n_heads, pool, positions, block_tables,
                                                            table_stride, scale, window, out);
  return launch_status("attention (tile)");
}

}  // namespace

bool attention_tile_fits(int n_heads, const DeviceKvPool& pool) {
  if (pool.n_kv_heads <= 0 || n_heads % pool.n_kv_heads != 0) return false;
  const int group = n_heads / pool.n_kv_heads;
  switch (pool.head_dim) {
    case 64:
      return group <= TileShape<64>::P;
    case 128:
      return group <= TileShape<128>::P;
    case 256:
      return group <= TileShape<256>::P;
    default:
      return false;
  }
}

Status attention_tile(const Stream& stream, const float* q, int64_t rows, int n_heads,
                      const DeviceKvPool& pool, const int32_t* positions, const int32_t* block_tables,
                      int64_t table_stride, float scale, int window, float* out) {
  if (!attention_tile_fits(n_heads, pool))
    return invalid_argument("attention (tile): head_dim must be 64, 128 or 256 and the group fit a tile");
  switch (pool.head_dim) {
    case 64:
      return launch_tile<64>(stream, q, rows, n_heads, pool, positions, block_tables, table_stride, scale,
                             window, out);
    case 128:
      return launch_tile<128>(stream, q, rows, n_heads, pool, positions, block_tables, table_stride, scale,
                              window, out);
    default:
      return launch_tile<256>(stream, q, rows, n_heads, pool, positions, block_tables, table_stride, scale,
                              window, out);
  }
}

}  // namespace tandem::kernels::gpu
