// MtpLayout: where the tensors of an MTP ("multi-token prediction") module
// live and how it fuses its two inputs (docs/formats.md "MTP head" and "MTP
// layers inside a target's checkpoint"; ADR 0027).
//
// One module step reads the next token's embedding e and the target's final
// hidden state h, normalises each with its own RMSNorm, projects the
// concatenation with a [H, 2H] matrix, runs one decoder block of the target's
// family and a final RMSNorm. What differs between layouts is data only:
//   tandem head  (its own directory, model_type "tandem_mtp"): enorm, hnorm,
//                eh_proj over concat[e, h], block "layer.*", final_norm;
//                the entry for token position p at RoPE position p.
//   MiMo         (inside the target's checkpoint, MiMo-7B): the
//                model.mtp_layers.{i}. prefix holding token_layernorm,
//                hidden_layernorm, input_proj over concat[h, e] (hidden
//                first), the Qwen2 block's tensors directly under the prefix,
//                final_layernorm; entry p at RoPE position p - 1, the
//                position of its hidden state (what MiMo's inference code
//                feeds; RoPE is relative, so only rounding differs).
// DeepSeek-V3 keeps its module as model.layers.{num_hidden_layers} (enorm,
// hnorm, eh_proj, shared_head): recognised so the error can say why it is
// refused (its block is MLA attention with MoE, which tandem lacks).
// Plain data, freely copyable.
#pragma once

#include <string>

#include "core/status.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace tandem::model {

struct MtpLayout {
  std::string description;     // for logs and errors: "tandem MTP head", "MiMo model.mtp_layers.0"
  std::string block_prefix;    // the decoder layer's tensors: block_prefix + "input_layernorm.weight", ...
  std::string embedding_norm;  // RMSNorm weight [H] of the next token's embedding
  std::string hidden_norm;     // RMSNorm weight [H] of the target's hidden state
  std::string projection;      // [H, 2H] weight of the fusing projection
  std::string final_norm;      // RMSNorm weight [H] after the block
  bool hidden_first = false;   // the projection reads concat[h, e] (true) or concat[e, h] (false)
  int rope_offset = 1;  // the entry in KV slot s (token position s + 1) sits at RoPE position s + rope_offset
};

// tandem's own head directory (tools/train/mtp.py).
MtpLayout tandem_head_layout();
// MiMo's module `index` inside the target's checkpoint.
MtpLayout mimo_layout(int index);

// The MTP layers stored in the checkpoint of a target with `config`: MiMo's
// when it holds model.mtp_layers.0.input_proj.weight. NotFound naming the
// directory when it holds none; Unimplemented, saying why, for DeepSeek-V3's
// layout (model.layers.{num_layers}.eh_proj.weight).
Expected<MtpLayout> find_embedded_mtp_layout(const Checkpoint& checkpoint, const ModelConfig& config);

}  // namespace tandem::model
