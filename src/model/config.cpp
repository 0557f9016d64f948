#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "config_reader.h"
#include "core/mapped_file.h"
#include "model/gguf_model.h"

namespace tandem::model {
namespace {

using json = nlohmann::json;
using internal::fill_gemma4_defaults;
using internal::parse_gemma4;
using internal::parse_gemma4_multimodal;
using internal::Reader;
using namespace internal::limits;

Expected<Family> parse_family(const std::string& type) {
  if (type == "llama") return Family::llama;
  if (type == "mistral") return Family::mistral;
  if (type == "qwen2" || type == "mimo") return Family::qwen2;  // MiMo: Qwen2 plus MTP layers
  if (type == "qwen3") return Family::qwen3;
  if (type == "qwen2_moe") return Family::qwen2_moe;
  if (type == "qwen3_moe") return Family::qwen3_moe;
  if (type == "mixtral") return Family::mixtral;
  if (type == "gemma2") return Family::gemma2;
  if (type == "gemma3_text") return Family::gemma3;
  if (type == "gemma4_text") return Family::gemma4;
  return unimplemented("model_type \"" + type + "\" is not supported (supported: " + supported_model_types() +
                       ")");
}

Status parse_rope_scaling(const Reader& r, const json* scaling, const std::string& field,
                          kernels::RopeScaling& s);

// Gemma4TextConfig.__post_init__'s layer_types when absent: every 6th layer
// is full attention.
json gemma4_default_layer_types(int layers) {
  json lt = json::array();
  for (int i = 0; i < layers; ++i) lt.push_back((i + 1) % 6 != 0 ? "sliding_attention" : "full_attention");
  return lt;
}

// One rope_parameters object (or a per-layer-type entry of it): theta and scaling.
Status parse_rope_parameters(const Reader& r, const json& p, const std::string& field, double& theta,
                             kernels::RopeScaling& s) {
  if (!p.is_object()) return r.error(field, "must be an object");
  TANDEM_RETURN_IF_ERROR(r.get_double(p, "rope_theta", field + ".rope_theta", theta, 0, kMaxRopeTheta));
  return parse_rope_scaling(r, &p, field, s);
}

// RoPE from either rope_parameters (transformers 5) or rope_theta + rope_scaling.
// gemma3_text has a second, local RoPE for its sliding layers: per-layer-type
// rope_parameters {"full_attention": {...}, "sliding_attention": {...}}, or
// classic rope_local_base_freq (default RoPE).
Status parse_rope(const Reader& r, ModelConfig& c) {
  if (c.family == Family::gemma4) return Status::Ok();  // per layer type, parse_gemma4
  const json& j = r.j();
  const bool gemma3 = c.family == Family::gemma3;
  c.local_rope = gemma3;
  if (r.has("rope_parameters")) {
    const json& p = j["rope_parameters"];
    if (!p.is_object()) return r.error("rope_parameters", "must be an object");
    if (!p.contains("full_attention") && !p.contains("sliding_attention")) {
      if (gemma3) c.local_rope = false;
      return parse_rope_parameters(r, p, "rope_parameters", c.rope_theta, c.rope_scaling);
    }
    if (!gemma3)
      return r.error("rope_parameters", "per-layer-type RoPE is not supported for this model_type");
    if (p.contains("full_attention"))
      TANDEM_RETURN_IF_ERROR(parse_rope_parameters(r, p["full_attention"], "rope_parameters.full_attention",
                                                   c.rope_theta, c.rope_scaling));
    if (p.contains("sliding_attention"))
      TANDEM_RETURN_IF_ERROR(parse_rope_parameters(r, p["sliding_attention"],
                                                   "rope_parameters.sliding_attention", c.local_rope_theta,
                                                   c.local_rope_scaling));
    return Status::Ok();
  }
  TANDEM_RETURN_IF_ERROR(r.get_double(j, "rope_theta", "rope_theta", c.rope_theta, 0, kMaxRopeTheta));
  if (gemma3)
    TANDEM_RETURN_IF_ERROR(r.get_double(j, "rope_local_base_freq", "rope_local_base_freq", c.local_rope_theta,
                                        0, kMaxRopeTheta));
  if (!r.has("rope_scaling")) return Status::Ok();
  if (!j["rope_scaling"].is_object()) return r.error("rope_scaling", "must be an object or null");
  return parse_rope_scaling(r, &j["rope_scaling"], "rope_scaling", c.rope_scaling);
}

Status parse_rope_scaling(const Reader& r, const json* scaling, const std::string& field,
                          kernels::RopeScaling& s) {
  std::string type = "default";
  for (const char* key : {"type", "rope_type"}) {  // rope_type wins when both are present
    if (!scaling->contains(key) || (*scaling)[key].is_null()) continue;
    if (!(*scaling)[key].is_string()) return r.error(field + "." + key, "must be a string");
    type = (*scaling)[key].get<std::string>();
  }
  double partial = 1.0;
  TANDEM_RETURN_IF_ERROR(
      r.get_double(*scaling, "partial_rotary_factor", field + ".partial_rotary_factor", partial));
  if (partial != 1.0) {
    return unimplemented(r.path() + ": field \"" + field + ".partial_rotary_factor\" != 1 is not supported");
  }
  if (type == "default") {
    s.kind = kernels::RopeScaling::Kind::none;
    return Status::Ok();
  }
  if (type != "linear" && type != "llama3")
    return unimplemented(r.path() + ": field \"" + field + "\" has rope type \"" + type +
                         "\", which is not supported (supported: default, linear, llama3)");
  if (!scaling->contains("factor")) return r.error(field + ".factor", "is missing");
  TANDEM_RETURN_IF_ERROR(r.get_double(*scaling, "factor", field + ".factor", s.factor, 0, kMaxRopeFactor));
  if ((*scaling)["factor"].is_null()) return r.error(field + ".factor", "is missing");
  if (type == "linear") {
    s.kind = kernels::RopeScaling::Kind::linear;
    return Status::Ok();
  }
  s.kind = kernels::RopeScaling::Kind::llama3;
  for (const char* f : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    if (!scaling->contains(f)) return r.error(field + "." + f, "is missing (required by rope type llama3)");
  }
  TANDEM_RETURN_IF_ERROR(r.get_double(*scaling, "low_freq_factor", field + ".low_freq_factor",
                                      s.low_freq_factor, 0, kMaxRopeFactor));
  TANDEM_RETURN_IF_ERROR(r.get_double(*scaling, "high_freq_factor", field + ".high_freq_factor",
                                      s.high_freq_factor, 0, kMaxRopeFactor));
  TANDEM_RETURN_IF_ERROR(r.get_double(*scaling, "original_max_position_embeddings",
                                      field + ".original_max_position_embeddings", s.original_max_position, 0,
                                      static_cast<double>(kMaxPositions)));
  for (const char* f : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    if ((*scaling)[f].is_null()) return r.error(field + "." + f, "is missing (required by rope type llama3)");
  }
  if (!(s.high_freq_factor > s.low_freq_factor))
    return r.error(
        field, "llama3 needs high_freq_factor > low_freq_factor and original_max_position_embeddings > 0");
  return Status::Ok();
}

// Sliding windows: layer_types when present (transformers 5), else the
// family's classic rule.
Status parse_windows(const Reader& r, ModelConfig& c) {
  c.layer_window.assign(c.num_layers, 0);
  int64_t window = 0;
  // A Qwen config with use_sliding_window false never uses the window, and transformers 5
  // writes 0 there (Qwen2MoeConfig); anywhere else a window must be >= 1.
  const bool qwen = c.family == Family::qwen2 || c.family == Family::qwen3 || c.family == Family::qwen2_moe ||
                    c.family == Family::qwen3_moe;
  bool use_window = false;
  TANDEM_RETURN_IF_ERROR(r.get_bool("use_sliding_window", use_window));
  TANDEM_RETURN_IF_ERROR(
      r.get_int("sliding_window", window, false, qwen && !use_window ? 0 : 1, kMaxPositions));
  const json& j = r.j();
  if (r.has("layer_types") || c.family == Family::gemma4) {
    const json lt = r.has("layer_types") ? j["layer_types"] : gemma4_default_layer_types(c.num_layers);
    if (!lt.is_array() || lt.size() != static_cast<size_t>(c.num_layers))
      return r.error("layer_types", "must be an array with one entry per layer");
    for (int i = 0; i < c.num_layers; ++i) {
      std::string t = lt[i].is_string() ? lt[i].get<std::string>() : "";
      if (t == "sliding_attention") {
        if (window <= 0)
          return r.error("layer_types", "names sliding_attention but sliding_window is not set");
        c.layer_window[i] = static_cast<int>(window);
      } else if (t != "full_attention") {
        return r.error("layer_types", "entry \"" + t + "\" is not full_attention or sliding_attention");
      }
    }
    return Status::Ok();
  }
  if (window <= 0) return Status::Ok();
  if (c.family == Family::gemma2) {
    // Classic gemma2: even layers slide (transformers 4's `not bool(layer_idx % 2)`).
    for (int i = 0; i < c.num_layers; i += 2) c.layer_window[i] = static_cast<int>(window);
  } else if (c.family == Family::gemma3) {
    // Classic gemma3_text: every sliding_window_pattern-th layer is global.
    int64_t pattern = 6;
    TANDEM_RETURN_IF_ERROR(r.get_int("sliding_window_pattern", pattern, false, 1, kMaxLayers));
    for (int i = 0; i < c.num_layers; ++i)
      if ((i + 1) % pattern != 0) c.layer_window[i] = static_cast<int>(window);
  } else if (c.family == Family::mistral || c.family == Family::mixtral) {
    c.layer_window.assign(c.num_layers, static_cast<int>(window));
  } else if (c.family == Family::qwen2 || c.family == Family::qwen3 || c.family == Family::qwen2_moe ||
             c.family == Family::qwen3_moe) {
    bool use = false;
    TANDEM_RETURN_IF_ERROR(r.get_bool("use_sliding_window", use));
    int64_t max_window_layers = c.num_layers;
    // Layers from max_window_layers on slide (transformers' rule); larger values mean none do.
    TANDEM_RETURN_IF_ERROR(
        r.get_int("max_window_layers", max_window_layers, false, 0, std::numeric_limits<int64_t>::max()));
    if (use) {
      for (int64_t i = max_window_layers; i < c.num_layers; ++i) c.layer_window[i] = static_cast<int>(window);
    }
  }
  return Status::Ok();
}

Status parse_dtype(const Reader& r, ModelConfig& c) {
  const char* field = r.has("dtype") ? "dtype" : "torch_dtype";
  if (!r.has(field)) return Status::Ok();
  const json& v = r.j()[field];
  if (!v.is_string()) return r.error(field, "must be a string");
  std::string s = v.get<std::string>();
  if (s == "bfloat16")
    c.declared_dtype = kernels::DType::bf16;
  else if (s == "float16")
    c.declared_dtype = kernels::DType::f16;
  else if (s == "float32")
    c.declared_dtype = kernels::DType::f32;
  else
    return r.error(field, "\"" + s + "\" is not bfloat16, float16 or float32");
  return Status::Ok();
}

// A token id in a config field: a non-negative integer that fits int32.
Status read_token_id(const Reader& r, const char* field, const json& v, int32_t& out) {
  if (!v.is_number_integer()) return r.error(field, "must be an integer or array of integers");
  if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t{kMaxTokenId} : v.get<int64_t>() < 0)
    // (Built by appending: GCC 12 warns a false -Wrestrict on `"(" + std::string&&` once inlined.)
    return r.error(field, std::string("(").append(v.dump()) + ") must be a token id in [0, " +
                              std::to_string(kMaxTokenId) + "]");
  out = static_cast<int32_t>(v.get<int64_t>());
  return Status::Ok();
}

Status parse_token_ids(const Reader& r, ModelConfig& c) {
  const json& j = r.j();
  if (r.has("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_array()) {
      for (const auto& x : e) {
        int32_t id = 0;
        TANDEM_RETURN_IF_ERROR(read_token_id(r, "eos_token_id", x, id));
        c.eos_token_ids.push_back(id);
      }
    } else {
      int32_t id = 0;
      TANDEM_RETURN_IF_ERROR(read_token_id(r, "eos_token_id", e, id));
      c.eos_token_ids.push_back(id);
    }
  }
  // A bos_token_id that is not an integer is ignored (some configs carry a list here; unused).
  if (r.has("bos_token_id") && j["bos_token_id"].is_number_integer())
    TANDEM_RETURN_IF_ERROR(read_token_id(r, "bos_token_id", j["bos_token_id"], c.bos_token_id));
  return Status::Ok();
}

Status parse_shapes(const Reader& r, ModelConfig& c) {
  int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  TANDEM_RETURN_IF_ERROR(r.get_int("vocab_size", c.vocab_size, true, 1, kMaxVocab));
  TANDEM_RETURN_IF_ERROR(r.get_int("hidden_size", c.hidden_size, true, 1, kMaxHidden));
  TANDEM_RETURN_IF_ERROR(r.get_int("intermediate_size", c.intermediate_size, true, 1, kMaxIntermediate));
  TANDEM_RETURN_IF_ERROR(r.get_int("num_hidden_layers", layers, true, 1, kMaxLayers));
  TANDEM_RETURN_IF_ERROR(r.get_int("num_attention_heads", heads, true, 1, kMaxHeads));
  kv_heads = heads;
  TANDEM_RETURN_IF_ERROR(r.get_int("num_key_value_heads", kv_heads, false, 1, kMaxHeads));
  if (heads % kv_heads != 0)
    return r.error(
        "num_key_value_heads",
        "(" + std::to_string(kv_heads) + ") must divide num_attention_heads (" + std::to_string(heads) + ")");
  if (r.has("head_dim")) {
    TANDEM_RETURN_IF_ERROR(r.get_int("head_dim", head_dim, true, 2, kMaxHeadDim));
  } else {
    if (c.hidden_size % heads != 0)
      return r.error("hidden_size", "(" + std::to_string(c.hidden_size) +
                                        ") is not a multiple of num_attention_heads (" +
                                        std::to_string(heads) + ") and there is no head_dim");
    head_dim = c.hidden_size / heads;
  }
  if (head_dim % 2 != 0 || head_dim < 2 || head_dim > kMaxHeadDim)
    return r.error("head_dim", "(" + std::to_string(head_dim) + ") must be even and in [2, " +
                                   std::to_string(kMaxHeadDim) +
                                   "] (hidden_size / num_attention_heads when absent)");
  c.num_layers = static_cast<int>(layers);
  c.num_heads = static_cast<int>(heads);
  c.num_kv_heads = static_cast<int>(kv_heads);
  c.head_dim = static_cast<int>(head_dim);
  TANDEM_RETURN_IF_ERROR(
      r.get_int("max_position_embeddings", c.max_position_embeddings, false, 1, kMaxPositions));
  double eps = c.rms_norm_eps;
  // Below ~1e-30 the float the kernels use would be (nearly) zero; above 1 it is no epsilon.
  TANDEM_RETURN_IF_ERROR(r.get_double(r.j(), "rms_norm_eps", "rms_norm_eps", eps, 1e-30, 1.0));
  c.rms_norm_eps = static_cast<float>(eps);
  return Status::Ok();
}

// Sparse MoE: expert count, top-k, expert width and which layers are sparse.
Status parse_moe(const Reader& r, ModelConfig& c) {
  const bool mixtral = c.family == Family::mixtral;
  int64_t experts = 0, top_k = 0, inter = mixtral ? c.intermediate_size : 0;
  // transformers 5 writes num_local_experts for both; classic qwen3_moe says num_experts.
  const char* experts_field = r.has("num_local_experts") || mixtral ? "num_local_experts" : "num_experts";
  TANDEM_RETURN_IF_ERROR(r.get_int(experts_field, experts, true, 1, kMaxExperts));
  TANDEM_RETURN_IF_ERROR(r.get_int("num_experts_per_tok", top_k, true, 1, experts));
  if (!mixtral) TANDEM_RETURN_IF_ERROR(r.get_int("moe_intermediate_size", inter, true, 1, kMaxIntermediate));
  if (c.family == Family::qwen2_moe)
    TANDEM_RETURN_IF_ERROR(
        r.get_int("shared_expert_intermediate_size", c.moe.shared_intermediate, true, 1, kMaxIntermediate));
  c.moe.num_experts = static_cast<int>(experts);
  c.moe.top_k = static_cast<int>(top_k);
  c.moe.expert_intermediate = inter;
  c.moe.norm_topk_prob = mixtral;
  if (!mixtral) TANDEM_RETURN_IF_ERROR(r.get_bool("norm_topk_prob", c.moe.norm_topk_prob));
  c.layer_sparse.assign(c.num_layers, 1);
  if (mixtral) return Status::Ok();
  int64_t step = 1;
  TANDEM_RETURN_IF_ERROR(r.get_int("decoder_sparse_step", step, false, 1, kMaxLayers));
  for (int i = 0; i < c.num_layers; ++i) c.layer_sparse[i] = (i + 1) % step == 0 ? 1 : 0;
  if (r.has("mlp_only_layers")) {
    const json& dense = r.j()["mlp_only_layers"];
    if (!dense.is_array()) return r.error("mlp_only_layers", "must be an array of layer indices");
    for (const json& v : dense) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.num_layers)
        return r.error("mlp_only_layers", "entry " + v.dump() + " is not a layer index in [0, " +
                                              std::to_string(c.num_layers) + ")");
      c.layer_sparse[v.get<int64_t>()] = 0;
    }
  }
  return Status::Ok();
}

// Gemma 2 / 3: norms, GeGLU, embedding scale, query scale and soft-capping.
Status parse_gemma(const Reader& r, ModelConfig& c) {
  c.gemma_norms = true;
  c.norm_plus_one = c.family != Family::gemma4;
  c.scale_embeddings = true;
  c.qk_norm = c.family == Family::gemma3 || c.family == Family::gemma4;
  c.mlp_activation = Activation::gelu_tanh;
  for (const char* field : {"hidden_activation", "hidden_act"}) {
    if (!r.has(field)) continue;
    const json& v = r.j()[field];
    const std::string act = v.is_string() ? v.get<std::string>() : "";
    if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
      return unimplemented(r.path() + ": field \"" + field + "\" \"" + act +
                           "\" is not supported (supported: gelu_pytorch_tanh)");
    break;  // hidden_activation wins when both are present (as in transformers)
  }
  // Absent fields take transformers' defaults (Gemma2Config: caps 50 / 30; Gemma3TextConfig: none);
  // an explicit null turns a cap off.
  const bool gemma2 = c.family == Family::gemma2;
  double scalar = 256, attn_cap = 0, final_cap = 0;
  if (gemma2 && !r.j().contains("attn_logit_softcapping")) attn_cap = 50;
  if (gemma2 && !r.j().contains("final_logit_softcapping")) final_cap = 30;
  TANDEM_RETURN_IF_ERROR(
      r.get_double(r.j(), "query_pre_attn_scalar", "query_pre_attn_scalar", scalar, 0, 1e9));
  TANDEM_RETURN_IF_ERROR(
      r.get_double(r.j(), "attn_logit_softcapping", "attn_logit_softcapping", attn_cap, 0, 1e9));
  TANDEM_RETURN_IF_ERROR(
      r.get_double(r.j(), "final_logit_softcapping", "final_logit_softcapping", final_cap, 0, 1e9));
  // transformers: scaling = query_pre_attn_scalar ** -0.5 (a Python double, used as f32).
  c.attn_scale = static_cast<float>(std::pow(scalar, -0.5));
  c.attn_softcap = static_cast<float>(attn_cap);
  c.final_softcap = static_cast<float>(final_cap);
  if (c.family == Family::gemma4) {
    c.attn_scale = 1.0f;  // Gemma4TextAttention.scaling (q and k are RMS-normed per head)
    c.attn_softcap = 0.0f;
  }
  return Status::Ok();
}

}  // namespace

const char* family_name(Family family) {
  switch (family) {
    case Family::llama:
      return "llama";
    case Family::mistral:
      return "mistral";
    case Family::qwen2:
      return "qwen2";
    case Family::qwen3:
      return "qwen3";
    case Family::qwen2_moe:
      return "qwen2_moe";
    case Family::qwen3_moe:
      return "qwen3_moe";
    case Family::mixtral:
      return "mixtral";
    case Family::gemma2:
      return "gemma2";
    case Family::gemma3:
      return "gemma3_text";
    case Family::gemma4:
      return "gemma4_text";
  }
  return "?";
}

const char* supported_model_types() {
  return "llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, mixtral, gemma2, gemma3_text, gemma3 (text "
         "only), gemma4_text, gemma4 (text only)";
}

namespace {

// A multimodal gemma3 config (Gemma3ForConditionalGeneration) read as text
// only: its text_config, with Gemma3TextConfig's defaults for absent fields
// (published configs list only what differs) and the top level's token ids
// and tie_word_embeddings; the tensors live under language_model.model.
Expected<ModelConfig> parse_gemma3_multimodal(const json& j, const std::string& path) {
  if (!j.contains("text_config") || !j["text_config"].is_object())
    return invalid_argument(path + ": field \"text_config\" must be an object (model_type gemma3)");
  json text = j["text_config"];
  const json defaults = {{"vocab_size", 262208},
                         {"hidden_size", 2304},
                         {"intermediate_size", 9216},
                         {"num_hidden_layers", 26},
                         {"num_attention_heads", 8},
                         {"num_key_value_heads", 4},
                         {"head_dim", 256},
                         {"rms_norm_eps", 1e-6},
                         {"sliding_window", 4096},
                         {"query_pre_attn_scalar", 256},
                         {"max_position_embeddings", 131072},
                         {"rope_theta", 1000000.0},
                         {"rope_local_base_freq", 10000.0},
                         {"hidden_activation", "gelu_pytorch_tanh"}};
  for (const auto& [key, value] : defaults.items())
    if (!text.contains(key)) text[key] = value;
  for (const char* key : {"eos_token_id", "bos_token_id", "tie_word_embeddings", "torch_dtype", "dtype"})
    if (j.contains(key) && !text.contains(key)) text[key] = j[key];
  if (!text.contains("tie_word_embeddings")) text["tie_word_embeddings"] = true;
  text["model_type"] = "gemma3_text";
  TANDEM_ASSIGN_OR_RETURN(ModelConfig c, parse_config(text.dump(), path + " (text_config)"));
  c.model_type = "gemma3";
  c.tensor_prefix = "language_model.model.";
  c.lm_head_name = "language_model.lm_head.weight";
  return c;
}

}  // namespace

Expected<ModelConfig> parse_config(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return invalid_argument(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return invalid_argument(path + ": not a JSON object");
  Reader r(j, path);
  ModelConfig c;
  if (!r.has("model_type") || !j["model_type"].is_string()) return r.error("model_type", "is missing");
  c.model_type = j["model_type"].get<std::string>();
  if (c.model_type == "gemma3") return parse_gemma3_multimodal(j, path);
  if (c.model_type == "gemma4") return parse_gemma4_multimodal(j, path);
  if (c.model_type == "gemma4_text") fill_gemma4_defaults(j);
  auto family = parse_family(c.model_type);
  if (!family.ok()) return family.status().with_context(path);
  c.family = *family;
  TANDEM_RETURN_IF_ERROR(parse_shapes(r, c));
  const bool gemma = c.family == Family::gemma2 || c.family == Family::gemma3 || c.family == Family::gemma4;
  if (r.has("hidden_act") && !gemma) {
    std::string act = j["hidden_act"].is_string() ? j["hidden_act"].get<std::string>() : "";
    if (act != "silu" && act != "swish")
      return unimplemented(path + ": field \"hidden_act\" \"" + act +
                           "\" is not supported (supported: silu)");
  }
  TANDEM_RETURN_IF_ERROR(parse_rope(r, c));
  TANDEM_RETURN_IF_ERROR(parse_windows(r, c));
  TANDEM_RETURN_IF_ERROR(parse_dtype(r, c));
  TANDEM_RETURN_IF_ERROR(parse_token_ids(r, c));
  c.tie_word_embeddings = gemma;  // Gemma2Config / Gemma3TextConfig default to tied
  TANDEM_RETURN_IF_ERROR(r.get_bool("tie_word_embeddings", c.tie_word_embeddings));
  bool attention_bias = false, mlp_bias = false;
  TANDEM_RETURN_IF_ERROR(r.get_bool("attention_bias", attention_bias));
  TANDEM_RETURN_IF_ERROR(r.get_bool("mlp_bias", mlp_bias));
  switch (c.family) {
    case Family::llama:
      c.qkv_bias = c.o_bias = attention_bias;
      c.mlp_bias = mlp_bias;
      break;
    case Family::mistral:
    case Family::mixtral:
      break;
    case Family::qwen2:
      c.qkv_bias = true;
      break;
    case Family::qwen2_moe:
      c.qkv_bias = true;  // Qwen2MoeConfig.qkv_bias, default true
      TANDEM_RETURN_IF_ERROR(r.get_bool("qkv_bias", c.qkv_bias));
      break;
    case Family::qwen3:
    case Family::qwen3_moe:
      c.qkv_bias = c.o_bias = attention_bias;
      c.qk_norm = true;
      break;
    case Family::gemma2:
    case Family::gemma3:
    case Family::gemma4:
      c.qkv_bias = c.o_bias = attention_bias;
      TANDEM_RETURN_IF_ERROR(parse_gemma(r, c));
      if (c.family == Family::gemma4) TANDEM_RETURN_IF_ERROR(parse_gemma4(r, c));
      break;
  }
  if (c.family == Family::qwen2_moe || c.family == Family::qwen3_moe || c.family == Family::mixtral)
    TANDEM_RETURN_IF_ERROR(parse_moe(r, c));
  return c;
}

Expected<ModelConfig> load_config(const std::string& dir) {
  if (is_gguf_path(dir)) {
    TANDEM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(dir));
    return gguf_config(file);
  }
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return not_found(path + ": no such file (is " + dir + " a model directory?)");
  TANDEM_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_config(text, path);
}

Expected<nlohmann::json> read_json_file(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(path + ": " + e.what());
  }
}

}  // namespace tandem::model
