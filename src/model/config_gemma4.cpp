// gemma4_text's config.json (matched against transformers 5.24.0's
// Gemma4TextConfig / Gemma4TextModel): per-layer attention shapes
// (per_layer_config, or the older global_head_dim / num_global_key_value_heads),
// KV sharing, attention_k_eq_v, RoPE per layer type ("proportional" on
// full-attention layers), per-layer input embeddings, the double-wide MLP and
// the MoE block. Anything transformers would compute differently from what
// the forward implements is refused, naming the key. Design:
// docs/adr/0036-gemma4-text.md.
#include <algorithm>
#include <set>
#include <string>

#include "config_reader.h"
#include "model/config.h"

namespace tandem::model::internal {
namespace {

using namespace limits;

// The attention kernels' largest head (kernels' kMaxHeadDim).
constexpr int kernels_max_head_dim = 512;

Status unsupported(const Reader& r, const std::string& field, const std::string& what) {
  return unimplemented(r.path() + ": field \"" + field + "\" " + what);
}

// rope_parameters.{sliding_attention, full_attention}: "default" (theta) or
// "proportional" (theta, partial_rotary_factor, factor).
Status parse_layer_type_rope(const Reader& r, const json& all, const char* type, ModelConfig& c) {
  const std::string field = std::string("rope_parameters.") + type;
  if (!all.contains(type) || !all[type].is_object()) return r.error(field, "is missing (an object)");
  const json& p = all[type];
  const bool sliding = std::string(type) == "sliding_attention";
  std::string rope_type = "default";
  if (p.contains("rope_type") && !p["rope_type"].is_null()) {
    if (!p["rope_type"].is_string()) return r.error(field + ".rope_type", "must be a string");
    rope_type = p["rope_type"].get<std::string>();
  }
  if (!p.contains("rope_theta")) return r.error(field + ".rope_theta", "is missing");
  double theta = 0, factor = 1.0, partial = 1.0;
  TANDEM_RETURN_IF_ERROR(r.get_double(p, "rope_theta", field + ".rope_theta", theta, 0, kMaxRopeTheta));
  if (rope_type == "default") {
    // Gemma4TextRotaryEmbedding's own default: every pair rotates; any
    // partial_rotary_factor or factor in the entry is not read.
  } else if (rope_type == "proportional") {
    TANDEM_RETURN_IF_ERROR(r.get_double(p, "factor", field + ".factor", factor, 0, kMaxRopeFactor));
    TANDEM_RETURN_IF_ERROR(
        r.get_double(p, "partial_rotary_factor", field + ".partial_rotary_factor", partial, -1e-300, 1.0));
  } else {
    return unsupported(
        r, field + ".rope_type",
        "\"" + rope_type + "\" is not supported for gemma4_text (supported: default, proportional)");
  }
  if (sliding) {
    if (rope_type != "default")
      return unsupported(r, field + ".rope_type",
                         "must be default on sliding layers (proportional is supported "
                         "on full_attention only)");
    c.local_rope_theta = theta;
    return Status::Ok();
  }
  c.rope_theta = theta;
  c.rope_proportional = rope_type == "proportional";
  c.rope_partial_rotary = partial;
  c.rope_scaling.kind = kernels::RopeScaling::Kind::none;
  c.rope_scaling.factor = factor;
  return Status::Ok();
}

// Per-layer head_dim / num_key_value_heads: per_layer_config when present,
// else Gemma4TextConfig.__post_init__'s rule (full-attention layers get
// global_head_dim, default 512, and, with attention_k_eq_v,
// num_global_key_value_heads).
Status parse_layer_shapes(const Reader& r, ModelConfig& c, bool k_eq_v) {
  const json& j = r.j();
  c.layer_attention.assign(c.num_layers, LayerAttention{c.head_dim, c.num_kv_heads, 0, false});
  auto set_override = [&](int layer, const json& o, const std::string& field) -> Status {
    if (!o.is_object()) return r.error(field, "must be an object");
    for (const auto& [key, value] : o.items()) {
      if (key != "head_dim" && key != "num_key_value_heads")
        return unsupported(r, field + "." + key,
                           "is not supported (per_layer_config may set head_dim and num_key_value_heads)");
      const int64_t max = key == "head_dim" ? kMaxHeadDim : kMaxHeads;
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > max)
        return r.error(field + "." + key, "must be an integer in [1, " + std::to_string(max) + "]");
      int& slot = key == "head_dim" ? c.layer_attention[layer].head_dim : c.layer_attention[layer].kv_heads;
      slot = static_cast<int>(value.get<int64_t>());
    }
    return Status::Ok();
  };
  if (j.contains("per_layer_config") && !j["per_layer_config"].is_null()) {
    const json& plc = j["per_layer_config"];
    if (!plc.is_object()) return r.error("per_layer_config", "must be an object of layer index -> overrides");
    for (const auto& [key, value] : plc.items()) {
      const std::string field = "per_layer_config." + key;
      int64_t layer = -1;
      try {
        size_t used = 0;
        layer = std::stoll(key, &used);
        if (used != key.size()) layer = -1;
      } catch (const std::exception&) {
        layer = -1;
      }
      if (layer < 0 || layer >= c.num_layers)
        return r.error(field, "is not a layer index in [0, " + std::to_string(c.num_layers) + ")");
      TANDEM_RETURN_IF_ERROR(set_override(static_cast<int>(layer), value, field));
    }
  } else {
    int64_t global_head_dim = 512, global_kv = 0;
    TANDEM_RETURN_IF_ERROR(r.get_int("global_head_dim", global_head_dim, false, 2, kMaxHeadDim));
    if (k_eq_v)
      TANDEM_RETURN_IF_ERROR(r.get_int("num_global_key_value_heads", global_kv, false, 1, kMaxHeads));
    for (int l = 0; l < c.num_layers; ++l) {
      if (c.layer_window[l] > 0) continue;
      c.layer_attention[l].head_dim = static_cast<int>(global_head_dim);
      if (global_kv > 0) c.layer_attention[l].kv_heads = static_cast<int>(global_kv);
    }
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerAttention& a = c.layer_attention[l];
    const std::string where = " (layer " + std::to_string(l) + ")";
    if (a.head_dim % 2 != 0 || a.head_dim > kernels_max_head_dim)
      return unsupported(r, "per_layer_config",
                         "head_dim " + std::to_string(a.head_dim) + where + " must be even and at most " +
                             std::to_string(kernels_max_head_dim));
    if (c.num_heads % a.kv_heads != 0)
      return r.error("per_layer_config", "num_key_value_heads " + std::to_string(a.kv_heads) + where +
                                             " must divide num_attention_heads");
    // transformers builds one RoPE table per layer type from that type's config,
    // and refuses a type whose layers differ.
    for (int m = 0; m < l; ++m)
      if ((c.layer_window[m] > 0) == (c.layer_window[l] > 0) && c.layer_attention[m].head_dim != a.head_dim)
        return unsupported(r, "per_layer_config",
                           "gives layers " + std::to_string(m) + " and " + std::to_string(l) +
                               " of one layer type different head_dims");
  }
  for (int l = 0; l < c.num_layers; ++l) c.layer_attention[l].k_eq_v = k_eq_v && c.layer_window[l] == 0;
  return Status::Ok();
}

// num_kv_shared_layers: the last N layers attend to the K/V of the last
// earlier layer of their own type (Gemma4TextConfig.kv_sharing_modes).
Status parse_kv_sharing(const Reader& r, ModelConfig& c) {
  int64_t shared = 0;
  TANDEM_RETURN_IF_ERROR(r.get_int("num_kv_shared_layers", shared, false, 0, c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) c.layer_attention[l].kv_source = l;
  if (shared == 0) return Status::Ok();
  if (shared == c.num_layers)
    return unsupported(r, "num_kv_shared_layers",
                       "equals num_hidden_layers: every layer reads another model's K/V (a Gemma 4 assistant "
                       "drafter), which is not supported");
  const int first_shared = c.num_layers - static_cast<int>(shared);
  for (int l = first_shared; l < c.num_layers; ++l) {
    int source = -1;
    for (int m = first_shared - 1; m >= 0 && source < 0; --m)
      if ((c.layer_window[m] > 0) == (c.layer_window[l] > 0)) source = m;
    if (source < 0)
      return r.error("num_kv_shared_layers",
                     "leaves layer " + std::to_string(l) + " no earlier layer of its type to share K/V with");
    LayerAttention& a = c.layer_attention[l];
    const LayerAttention& s = c.layer_attention[source];
    if (a.head_dim != s.head_dim || a.kv_heads != s.kv_heads)
      return unsupported(r, "per_layer_config",
                         "gives KV-shared layer " + std::to_string(l) +
                             " a K/V shape other than its source layer " + std::to_string(source) + "'s");
    a.kv_source = source;
    a.k_eq_v = s.k_eq_v;
  }
  bool double_wide = false;
  TANDEM_RETURN_IF_ERROR(r.get_bool("use_double_wide_mlp", double_wide));
  if (double_wide) {
    c.layer_intermediate.assign(c.num_layers, c.intermediate_size);
    for (int l = first_shared; l < c.num_layers; ++l) c.layer_intermediate[l] = 2 * c.intermediate_size;
  }
  return Status::Ok();
}

Status parse_per_layer_inputs(const Reader& r, ModelConfig& c) {
  TANDEM_RETURN_IF_ERROR(r.get_int("hidden_size_per_layer_input", c.per_layer_input, false, 0, kMaxHidden));
  if (c.per_layer_input == 0) return Status::Ok();
  TANDEM_RETURN_IF_ERROR(r.get_int("vocab_size_per_layer_input", c.per_layer_vocab, true, 1, kMaxVocab));
  if (c.per_layer_vocab < c.vocab_size)
    return r.error("vocab_size_per_layer_input",
                   "(" + std::to_string(c.per_layer_vocab) + ") must be at least vocab_size (" +
                       std::to_string(c.vocab_size) + "): every token needs a per-layer embedding");
  if (c.per_layer_input * c.num_layers > kMaxHidden * 64)
    return r.error("hidden_size_per_layer_input", "times num_hidden_layers is too large");
  return Status::Ok();
}

Status parse_moe_block(const Reader& r, ModelConfig& c) {
  bool enable = false;
  TANDEM_RETURN_IF_ERROR(r.get_bool("enable_moe_block", enable));
  if (!enable) return Status::Ok();
  int64_t experts = 0, top_k = 0, inter = 0;
  TANDEM_RETURN_IF_ERROR(r.get_int("num_experts", experts, true, 1, kMaxExperts));
  TANDEM_RETURN_IF_ERROR(r.get_int("top_k_experts", top_k, true, 1, experts));
  TANDEM_RETURN_IF_ERROR(r.get_int("moe_intermediate_size", inter, true, 1, kMaxIntermediate));
  c.moe.num_experts = static_cast<int>(experts);
  c.moe.top_k = static_cast<int>(top_k);
  c.moe.expert_intermediate = inter;
  c.moe.norm_topk_prob = true;  // Gemma4TextRouter always renormalises the top-k
  c.moe_beside_mlp = true;
  return Status::Ok();
}

}  // namespace

void fill_gemma4_defaults(json& j) {
  // Gemma4TextConfig's class defaults, for configs that list only what differs.
  const json defaults = {{"vocab_size", 262144},
                         {"hidden_size", 2304},
                         {"intermediate_size", 9216},
                         {"num_hidden_layers", 30},
                         {"num_attention_heads", 8},
                         {"num_key_value_heads", 4},
                         {"head_dim", 256},
                         {"hidden_activation", "gelu_pytorch_tanh"},
                         {"max_position_embeddings", 131072},
                         {"rms_norm_eps", 1e-6},
                         {"sliding_window", 512},
                         {"vocab_size_per_layer_input", 262144},
                         {"hidden_size_per_layer_input", 256},
                         {"tie_word_embeddings", true}};
  for (const auto& [key, value] : defaults.items())
    if (!j.contains(key)) j[key] = value;
  if (!j.contains("rope_parameters") || j["rope_parameters"].is_null())
    j["rope_parameters"] = {
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
        {"full_attention",
         {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}}}};
}

Status parse_gemma4(const Reader& r, ModelConfig& c) {
  const json& j = r.j();
  if (r.has("use_bidirectional_attention")) {
    const json& v = j["use_bidirectional_attention"];
    // "vision" makes only image tokens bidirectional: text is causal, as here.
    if (!v.is_string() || v.get<std::string>() != "vision")
      return unsupported(r, "use_bidirectional_attention",
                         v.dump() + " is not supported (text is decoded causally; null or \"vision\")");
  }
  // transformers forces the last layer to full attention (with a warning).
  c.layer_window.back() = 0;
  c.v_norm = true;
  c.layer_scalar = true;
  bool k_eq_v = false;
  TANDEM_RETURN_IF_ERROR(r.get_bool("attention_k_eq_v", k_eq_v));
  TANDEM_RETURN_IF_ERROR(parse_layer_shapes(r, c, k_eq_v));
  TANDEM_RETURN_IF_ERROR(parse_kv_sharing(r, c));
  if (!r.has("rope_parameters") || !j["rope_parameters"].is_object())
    return r.error("rope_parameters", "must be an object with sliding_attention and full_attention entries");
  const bool any_sliding =
      std::any_of(c.layer_window.begin(), c.layer_window.end(), [](int w) { return w > 0; });
  if (any_sliding)
    TANDEM_RETURN_IF_ERROR(parse_layer_type_rope(r, j["rope_parameters"], "sliding_attention", c));
  TANDEM_RETURN_IF_ERROR(parse_layer_type_rope(r, j["rope_parameters"], "full_attention", c));
  c.local_rope = true;
  TANDEM_RETURN_IF_ERROR(parse_per_layer_inputs(r, c));
  return parse_moe_block(r, c);
}

Expected<ModelConfig> parse_gemma4_multimodal(const json& j, const std::string& path) {
  if (!j.contains("text_config") || !j["text_config"].is_object())
    return invalid_argument(path + ": field \"text_config\" must be an object (model_type gemma4)");
  json text = j["text_config"];
  for (const char* key : {"eos_token_id", "bos_token_id", "tie_word_embeddings", "torch_dtype", "dtype"})
    if (j.contains(key) && !text.contains(key)) text[key] = j[key];
  text["model_type"] = "gemma4_text";
  TANDEM_ASSIGN_OR_RETURN(ModelConfig c, parse_config(text.dump(), path + " (text_config)"));
  c.model_type = "gemma4";
  c.tensor_prefix = "model.language_model.";
  c.lm_head_name = "lm_head.weight";
  return c;
}

}  // namespace tandem::model::internal
