// model/weights_quant.h — `--weights q8_0|q4_0|q4_k`: quantizing a Hugging
// Face checkpoint's matrices at load (docs/quantized.md, ADR 0014).
//
// Which matrices take which type (llama.cpp's quantize keeps some tensors at
// a higher precision; so does this):
//   - every decoder-layer linear weight (fused qkv, o, fused gate/up, down),
//     sparse MoE experts included (ADR 0078): the requested type; a q4_k
//     matrix whose k is not a multiple of 256 (e.g. Qwen2.5-0.5B's hidden
//     896) takes q5_0 instead, as llama.cpp falls back (q4_0 before
//     2026-12-06; ADR 0046 had kept it for now);
//   - the LM head: q8_0 for every request (llama.cpp uses q6_k for
//     output.weight in its 4-bit types; ADR 0014, 0046);
//   - the embedding table stays as stored (one row is read per token);
//   - norms and biases stay f32.
// Values are widened to f32 exactly, then quantized by kernels::quantize
// (q8_0 / q4_0 / q5_0 bit-identical to gguf-py, all of them to llama.cpp's
// quantizer, ADR 0046). Errors: parse only (InvalidArgument).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace tandem::model {

// "stored", "q8_0", "q4_0", "q4_k" (trimmed, case-insensitive).
Expected<WeightsQuant> parse_weights_quant(const std::string& text);
const char* weights_quant_name(WeightsQuant w);

// The dtype a [n][k] matrix of `stored` dtype is packed in under `w`
// (lm_head: the LM head rule above). Returns `stored` when k fits no block.
kernels::DType quantized_dtype(WeightsQuant w, kernels::DType stored, int64_t k, bool lm_head);

// Packs the row-wise concatenation of `parts` (each [n_i, k], any float
// dtype) quantized to `target` (a quantized dtype with k a multiple of its block).
kernels::PackedMatrix quantize_rows(const std::vector<const TensorView*>& parts, kernels::DType target);

}  // namespace tandem::model
