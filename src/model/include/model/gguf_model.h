// GGUF models: a GGUF file's metadata as a ModelConfig and its tensors as a
// Checkpoint under the Hugging Face names Model::load expects.
//
// Architectures (`general.architecture`): llama (llama.cpp also writes
// Mistral models as llama), mistral, qwen2, qwen3. Hyper-parameters come from
// the `{arch}.*` keys and are turned into a config.json-shaped object that
// parse_config validates like any config.json (docs/formats.md, "GGUF", has
// the key table). Tensor names map `token_embd` → `model.embed_tokens`,
// `blk.N.attn_q` → `model.layers.N.self_attn.q_proj`, …; names tandem does
// not use are left out. Dimensions are reversed (GGUF lists the contiguous
// one first). For llama/mistral the converter permuted the rows of attn_q and
// attn_k; the views say so (TensorView::rope_group_rows) and the loader
// restores Hugging Face's order (ADR 0011), so results equal the original
// checkpoint's bit for bit.
//
// Tensor types: gguf_kernel_dtype() is the one mapping from a GGUF type to a
// kernel DType. F32, F16 and BF16 load; the quantized types llama.cpp's
// Q8_0/Q4_0/Q4_K_M files hold are recognised and refused with Unimplemented
// until the quantized kernels exist; every other type is Unimplemented naming
// the tensor and the type. Stateless functions; errors name the file, the key
// or the tensor.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/safetensors.h"

namespace tandem::model {

// True unless `path` is a directory, when it ends in ".gguf" (any case) —
// opening it then reports what is wrong, missing file or not GGUF — or is a
// file that starts with the GGUF magic, whatever its name.
bool is_gguf_path(const std::string& path);

// The kernel DType a tensor of GGUF type `type_id` is handed to
// kernels::PackedMatrix::pack as (its bytes exactly as in the file);
// Unimplemented naming `tensor` and the type otherwise.
Expected<kernels::DType> gguf_kernel_dtype(uint32_t type_id, const std::string& tensor);

// The Hugging Face name of a GGUF tensor, "" for one tandem does not use. A
// sparse layer's expert stack (ffn_*_exps) gets its experts' common name,
// "model.layers.L.mlp.experts.P_proj.weight"; gguf_checkpoint splits it.
std::string hf_tensor_name(std::string_view gguf_name);

// The config.json object the metadata describes (before validation).
Expected<nlohmann::json> gguf_config_json(const GgufFile& file);
// gguf_config_json validated by parse_config.
Expected<ModelConfig> gguf_config(const GgufFile& file);

// The tensors tandem uses, as a Checkpoint sharing ownership of `file`.
// `config` is gguf_config(*file) (it decides the Q/K row permutation).
Expected<Checkpoint> gguf_checkpoint(std::shared_ptr<const GgufFile> file, const ModelConfig& config);

}  // namespace tandem::model
