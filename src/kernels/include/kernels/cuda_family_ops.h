// kernels/cuda_family_ops.h — the device ops the Gemma 2/3/4 and sparse-MoE families
// add to the forward (families.cu; compiled only when TANDEM_HAVE_CUDA).
// Design: docs/adr/0045-cuda-families.md.
//
// Every op is row-wise or element-wise: a row's outputs are a function of that
// row's inputs only (the router's softmax and top-k, the expert combine run
// one thread per row in a fixed order), so nothing here can depend on the
// batch. Transcendentals follow the CPU reference kernels' formulas (double
// evaluation, one rounding) where the CPU reference does; soft-capping and the
// shared-expert sigmoid follow the CPU forward's f32 formulas. Compiled with
// --fmad=false: products and sums round separately, as written.
//
// Units, layouts, errors and threading as kernels/cuda_ops.h: device
// pointers, row-major f32 rows, Status for bad shapes or a failed launch,
// asynchronous on `stream`.
#pragma once

#include <cstdint>

#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

// x[i] = x[i] * scale (Gemma's embedding scale; one f32 product).
Status scale_inplace(const Stream& stream, float* x, int64_t count, float scale);

// x[i] = tanhf(x[i] / cap) * cap (Gemma 2's final-logit soft-capping), cap > 0.
Status softcap_inplace(const Stream& stream, float* x, int64_t count, float cap);

// out[r][i] = gelu_tanh(gate_up[r][i]) * gate_up[r][inter + i], evaluated in
// double and rounded once (reference::gelu_tanh_gate's formula).
Status gelu_tanh_rows(const Stream& stream, const float* gate_up, int64_t rows, int64_t inter, float* out);

// The sparse router of ADR 0023, one row per thread: the softmax of
// logits[r][0..n_experts) (reference::softmax_row's formula), the top_k
// largest probabilities (the lower expert index first on ties), renormalised
// to sum 1 when `renormalise` (the sum taken over the top-k in descending
// order, then one division each), stored in ascending expert order:
// experts[r][j], weights[r][j], j < top_k. n_experts <= 512, top_k <= n_experts.
Status moe_route(const Stream& stream, const float* logits, int64_t rows, int n_experts, int top_k,
                 bool renormalise, int32_t* experts, float* weights);

// dst[indices[r]] = src[r] for r < rows (rows of `dim` floats; distinct indices).
Status scatter_rows(const Stream& stream, const float* src, const int32_t* indices, int64_t rows, int64_t dim,
                    float* dst);

// out[r][i] = ((0 + w[r][0]·y[r][0][i]) + w[r][1]·y[r][1][i]) + … over j < top_k
// in order (the CPU combine_routed), then + shared_scale[r]·shared[r][i] when
// shared != nullptr. y: [rows][top_k][dim], weights [rows][top_k].
Status moe_combine(const Stream& stream, const float* y, const float* weights, int64_t rows, int top_k,
                   int64_t dim, const float* shared_scale, const float* shared, float* out);

// x[i] = 1 / (1 + expf(-x[i])) (the shared-expert gate).
Status sigmoid_inplace(const Stream& stream, float* x, int64_t count);

// ---------------------------------------------------------------- Gemma 4 (ADR 0036 / 0045)
// dst[r][i] = src[r][col0 + i], i < n (src rows of src_width floats, dst rows of n):
// one part of a fused projection ([q | k | v], [q | k] with k_eq_v).
Status copy_columns(const Stream& stream, const float* src, int64_t rows, int64_t src_width, int64_t col0,
                    int64_t n, float* dst);
// x[r][i] = (x[r][i] * scale[i]) * factor (two f32 roundings: the Gemma 4 router's input).
Status scale_columns(const Stream& stream, float* x, int64_t rows, int64_t dim, const float* scale,
                     float factor);
// weights[i] = weights[i] * scale[experts[i]], i < count (the per-expert scale after top-k).
Status scale_by_expert(const Stream& stream, const int32_t* experts, float* weights, int64_t count,
                       const float* scale);
// y[i] = (x[i] + y[i]) * factor (per-layer inputs: (projection + token part) * 2^-0.5).
Status add_then_scale(const Stream& stream, const float* x, float* y, int64_t count, float factor);
// gate[r][i] = gelu_tanh(gate[r][i]) * input[r * input_stride + i], i < dim, in place
// (reference::gelu_tanh_gate's formula; the per-layer input gate).
Status gelu_tanh_gate_strided(const Stream& stream, float* gate, int64_t rows, int64_t dim,
                              const float* input, int64_t input_stride);

}  // namespace tandem::kernels::gpu
