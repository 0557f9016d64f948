// quant/quantize_blocks.h — one GGUF block from f32 values, as llama.cpp's
// reference quantizers (ggml's quantize_row_<type>_ref, what
// llama_model_quantize runs without an importance matrix) produce it:
// the same search, the same f32 operations in the same order, the same
// rounding, so the bytes are identical (tests/fixtures/quant/llama_cpp.bin,
// ADR 0046). Internal to tandem_kernels; kernels::quantize is the entry point.
//
// This file must be compiled without floating-point contraction
// (-ffp-contract=off, as all of tandem_kernels is): a fused a·b+c rounds
// once where the reference rounds twice.
#pragma once

#include <cstdint>

namespace tandem::kernels::quant {

// ggml's rounding (nearest_int): adding 1.5·2^23 leaves round-half-even(v)
// in the low mantissa bits. Equal to nearbyint for |v| < 2^22; beyond that,
// and for NaN / inf, it wraps exactly as the reference does (no UB).
int round_like_ggml(float v);

void quantize_block_q5_0(const float* x, uint8_t* out);  // 32 values, 22 bytes
// `blocks` super-blocks of 256 values, 144 bytes each; the scalar/SSE
// variant (the AVX2 and AVX-512 tables have wider ones, same bytes).
void quantize_q4_k_reference(const float* x, int64_t blocks, uint8_t* out);
// `blocks` q4_0 blocks (32 values, 18 bytes each), one at a time: gguf-py's
// rule (quant/quantize.cpp); the AVX2 / AVX-512 tables give the same bytes.
void quantize_q4_0_reference(const float* x, int64_t blocks, uint8_t* out);
void quantize_block_q6_k(const float* x, uint8_t* out);  // 256 values, 210 bytes

}  // namespace tandem::kernels::quant
