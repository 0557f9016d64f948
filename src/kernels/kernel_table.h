// kernel_table.h — the per-ISA entry points behind ops.h (internal to
// tandem_kernels).
//
// Each ISA (reference/, avx2/, avx512/) fills one KernelTable in its own
// translation units, compiled with that ISA's target flags only; the public
// ops in matmul.cpp, rowwise.cpp, rope.cpp and attention.cpp own threading
// and call through the table chosen by Ctx::isa. Table functions are
// single-threaded, never allocate, and compute each output with a reduction
// order that is a pure function of the reduction length (and, for attention,
// absolute positions) — so calling them on any subset of rows or columns
// gives the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops.h"
#include "quant/layout.h"

namespace tandem::kernels {

// ---------------------------------------------------------------- packed weights
// PackedMatrix layout (the same for every ISA and dtype): columns are grouped
// into panels of kPanel outputs, zero-padded past n. Panel p is one
// contiguous block, k-major: weight W[p*kPanel + j][kk] sits at element
// (p * k + kk) * kPanel + packed_slot(dtype, j). One pass over a panel
// streams it front to back.
//
// Within one k row of a panel, column j sits in slot packed_slot(dtype, j).
// f32 / f16: slot j. bf16: each 32-column group is interleaved — slot 2i holds
// column i, slot 2i+1 column 16 + i — so every 32-bit word carries two
// columns and 32 bf16 widen to two f32 vectors with one shift and one mask
// (half the uops of zero-extension; they compete with the FMAs for ports).
inline constexpr int64_t kPanel = 64;
inline int64_t panel_count(int64_t n) { return (n + kPanel - 1) / kPanel; }
inline int64_t packed_slot(DType dtype, int64_t j) {
  if (dtype != DType::bf16) return j;
  const int64_t group = j & ~int64_t{31}, i = j & 31;
  return group + (i < 16 ? 2 * i : 2 * (i - 16) + 1);
}

// One call computes, for rows [0, m) and panels [panel_begin, panel_end):
//   y[r*ldy + col] = sum over kk in [k_begin, k_end) of x[r*ldx + kk] * W[col][kk]
// as a single FMA chain per output in increasing kk, starting from 0.0f, for
// columns col < n (padding columns are never stored).
//
// The bf16 pairs chain (matmul_bf16_pairs; bf16 weights and bf16 activations
// xb, ADR 0082) is vdpbf16ps's: from acc = +0, for each pair (kk, kk + 1) from
// k_begin (even) up, acc = step(acc, xb[kk+1], W[col][kk+1]) then
// acc = step(acc, xb[kk], W[col][kk]), where step(a, x, w) = ftz(fma(daz(x),
// daz(w), daz(a))) — a denormal input reads as a zero of its sign, a denormal
// result is flushed the same way. An odd count's last pair is (xb[kk], 0) x
// (W[col][kk], 0): its first step adds +0 * +0.
struct MatmulArgs {
  const float* x = nullptr;
  int64_t ldx = 0;
  const uint16_t* xb = nullptr;  // the bf16 pairs chain's activations (xb[r*ldxb + kk]); else null
  int64_t ldxb = 0;              // even; a row of odd k has a zero past its end
  int64_t m = 0;
  const uint8_t* w = nullptr;  // PackedMatrix::data()
  DType dtype = DType::f32;
  int64_t k = 0;  // full K of the packed matrix (panel stride)
  int64_t k_begin = 0, k_end = 0;
  int64_t panel_begin = 0, panel_end = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t n = 0;
};

// One (query row, head) of attention: keys at positions [lo, p] of the
// sequence with `block_table`, kv head `kv_head`, visited in kAttentionChunk
// chunks aligned to absolute positions with an online-softmax merge in chunk
// order. q and out hold head_dim floats.
struct AttendArgs {
  const float* q = nullptr;
  const KvPool* pool = nullptr;
  const int32_t* block_table = nullptr;
  int kv_head = 0;
  int32_t lo = 0, p = 0;
  float scale = 1.0f;
  float softcap = 0.0f;  // > 0: scores become tanh(s / softcap) * softcap
  float* out = nullptr;
};

// The score soft-capping every attend variant applies (Gemma 2's
// attn_logit_softcapping): scalar std::tanh, so all variants agree bitwise.
inline float soft_cap(float score, float cap) { return cap > 0.0f ? std::tanh(score / cap) * cap : score; }

// K slices GemmMode::splitk uses for this call (1 = the invariant path).
int64_t splitk_parts(int64_t m, int64_t n, int64_t k, int threads);

struct KernelTable {
  void (*matmul_panels)(const MatmulArgs& args);
  // bf16 weights x args.xb, the bf16 pairs chain (args.x unused): vdpbf16ps
  // where the CPU has AVX512_BF16, its FMA emulation on other AVX-512 CPUs,
  // the scalar reference on the AVX2 / scalar tables (all the same bits).
  void (*matmul_bf16_pairs)(const MatmulArgs& args);
  void (*rmsnorm_row)(const float* x, const float* weight, float* y, int64_t dim, float eps);
  void (*softmax_row)(float* x, int64_t n);
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t count);
  void (*gelu_tanh_gate)(const float* gate, const float* up, float* out, int64_t count);
  void (*add_inplace)(float* y, const float* x, int64_t count);
  // src: `count` elements of dtype -> f32 (exact).
  void (*to_f32)(const void* src, DType dtype, int64_t count, float* dst);
  // Rotates one row: x holds n_heads heads of head_dim; cos/sin hold
  // rotary_dim/2 entries. Each output is round(round(a*c) -/+ round(b*s)),
  // the arithmetic transformers' apply_rotary_pos_emb does in f32.
  void (*rope_row)(float* x, int n_heads, int head_dim, const float* cos, const float* sin, int rotary_dim,
                   RopeLayout layout);
  void (*attend)(const AttendArgs& args);
  // Quantized weights (quant/layout.h): the canonical chain of ADR 0013 —
  // bitwise the same in every variant.
  void (*matmul_quant)(const quant::QuantMatmulArgs& args);
  // f32 rows -> ActBlocks: quant::quantize_activations' bytes in every variant
  // (ADR 0062).
  void (*quantize_act)(const float* x, int64_t k, quant::ActBlock* out);
  // f32 -> `blocks` q4_k super-blocks, llama.cpp's reference quantizer's
  // bytes in every variant (quant/q4_k_fit.h; ADR 0064).
  void (*quantize_q4_k)(const float* x, int64_t blocks, uint8_t* out);
  // f32 -> `blocks` q4_0 blocks, quant/quantize.cpp's scalar bytes in every
  // variant (ADR 0064).
  void (*quantize_q4_0)(const float* x, int64_t blocks, uint8_t* out);
};

const KernelTable& reference_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
// The table for `isa`; CHECKs that this CPU supports it.
const KernelTable& kernels_for(Isa isa);

// Largest head_dim / rotary_dim the kernels accept (stack buffers).
inline constexpr int kMaxHeadDim = 512;

}  // namespace tandem::kernels
