// Internal to the model library: helpers model.cpp shares with the family
// files (moe.cpp, gemma.cpp). Not part of the public headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "model/model.h"
#include "model/safetensors.h"

namespace tandem::model::internal {

// model.cpp: the row-wise concatenation of `parts` (each [n_i, k]) packed as
// one matrix, in the packing Model::load uses for every matrix (quantized as
// `weights` asks, model/weights_quant.h).
kernels::PackedMatrix pack_matrix_rows(const std::vector<const TensorView*>& parts,
                                       WeightsQuant weights = WeightsQuant::stored);
// model.cpp: a tensor widened to f32.
std::vector<float> tensor_to_f32(const TensorView& v);

// moe.cpp: bytes one token streams through a sparse layer's router and its
// top_k experts (every expert has the same shape); 0 for a dense layer.
size_t moe_bytes_per_token(const LayerWeights& w, int top_k);

// gemma.cpp: f32(sqrt(hidden)) rounded to `dtype`.
float gemma_embed_scale(int64_t hidden, kernels::DType dtype);

}  // namespace tandem::model::internal
