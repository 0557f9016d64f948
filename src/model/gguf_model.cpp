#include "model/gguf_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tandem::model {
namespace {

using json = nlohmann::json;

bool permuted_architecture(const std::string& arch) { return arch == "llama" || arch == "mistral"; }

// Copies the integer metadata `key` into j[field]; absent is an error only when required.
Status copy_int(const GgufFile& f, const std::string& key, json& j, const char* field, bool required) {
  if (f.find(key) == nullptr)
    return required ? not_found(f.path() + ": metadata \"" + key + "\" is missing") : Status::Ok();
  TANDEM_ASSIGN_OR_RETURN(int64_t v, f.get_int(key));
  j[field] = v;
  return Status::Ok();
}

Status copy_float(const GgufFile& f, const std::string& key, json& j, const char* field) {
  if (f.find(key) == nullptr) return Status::Ok();
  TANDEM_ASSIGN_OR_RETURN(double v, f.get_float(key));
  j[field] = v;
  return Status::Ok();
}

const char* torch_dtype_of(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32:
      return "float32";
    case GgmlType::f16:
      return "float16";
    case GgmlType::bf16:
      return "bfloat16";
    default:
      return nullptr;
  }
}

// The divisor llama3 scaling applies to the frequency of wavelength `wavelen`
// (transformers' _compute_llama3_parameters, as a divisor).
double llama3_divisor(double wavelen, double factor, double low, double high, double original) {
  if (wavelen < original / high) return 1.0;
  if (wavelen > original / low) return factor;
  const double smooth = (original / wavelen - low) / (high - low);
  return 1.0 / ((1 - smooth) / factor + smooth);
}

// llama.cpp's converter stores Llama-3 RoPE scaling as a `rope_freqs` tensor of
// per-frequency divisors instead of its parameters. They are recovered here:
// factor is the divisor of the lowest frequency, low_freq_factor is 1 (every
// published Llama 3.x), high_freq_factor one of a few usual values, and the
// original context either `rope.scaling.original_context_length`, 8192, or
// solved from a divisor in the smooth region (rounded to an integer). The
// first candidate that reproduces every stored divisor (to 1e-4) is taken, so
// tandem computes the frequencies from the same parameters as for the
// Hugging Face checkpoint; none does: Unimplemented.
Status fit_llama3_rope(const GgufFile& f, const GgufTensor& t, const std::string& arch, int64_t head_dim,
                       double theta, json& j) {
  const std::string where = f.path() + ": tensor \"rope_freqs.weight\"";
  if (t.type != static_cast<uint32_t>(GgmlType::f32) || t.dims.size() != 1 || t.dims[0] * 2 != head_dim)
    return invalid_argument(where + " must be F32 of [head_dim / 2] = [" + std::to_string(head_dim / 2) +
                            "]");
  std::vector<float> stored(static_cast<size_t>(t.dims[0]));
  std::memcpy(stored.data(), t.data, stored.size() * sizeof(float));
  bool all_one = true;
  for (float s : stored) all_one = all_one && s == 1.0f;
  if (all_one) return Status::Ok();
  const double factor = stored.back(), low = 1.0, pi = 3.14159265358979323846;
  if (!(factor > 1.0) || !std::isfinite(factor))
    return unimplemented(where + ": the lowest frequency's divisor " + std::to_string(factor) +
                         " is not a Llama-3 scaling factor");
  std::vector<double> wavelen(stored.size());
  for (size_t i = 0; i < stored.size(); ++i)
    wavelen[i] = 2 * pi * std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
  std::vector<double> originals = {8192};
  if (const std::string key = arch + ".rope.scaling.original_context_length"; f.find(key) != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(int64_t v, f.get_int(key));
    originals.insert(originals.begin(), static_cast<double>(v));
  }
  double last_unscaled = 0;  // the longest wavelength left unscaled
  for (size_t i = 0; i < stored.size(); ++i)
    if (stored[i] == 1.0f) last_unscaled = std::max(last_unscaled, wavelen[i]);
  for (double high : {4.0, 2.0, 8.0, 3.0, 16.0, 1.5, 32.0}) {
    std::vector<double> candidates = originals;
    for (size_t i = 0; i < stored.size(); ++i) {
      if (stored[i] == 1.0f || stored[i] == static_cast<float>(factor)) continue;
      const double smooth = (1.0 / stored[i] - 1.0 / factor) / (1.0 - 1.0 / factor);
      candidates.push_back(std::round(wavelen[i] * (low + smooth * (high - low))));
    }
    candidates.push_back(std::floor(last_unscaled * high) + 1);  // no smooth divisor: the smallest consistent
    for (double original : candidates) {
      if (!(original >= 1 && original <= 1e9)) continue;
      bool fits = true;
      for (size_t i = 0; i < stored.size() && fits; ++i) {
        const double want = llama3_divisor(wavelen[i], factor, low, high, original);
        fits = std::fabs(want - stored[i]) <= 1e-4 * std::fabs(want);
      }
      if (!fits) continue;
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", factor},
                           {"low_freq_factor", low},
                           {"high_freq_factor", high},
                           {"original_max_position_embeddings", static_cast<int64_t>(original)}};
      return Status::Ok();
    }
  }
  return unimplemented(where + " holds RoPE divisors that no Llama-3 scaling (factor " +
                       std::to_string(factor) + ", low_freq_factor 1) reproduces");
}

Status rope_scaling_json(const GgufFile& f, const std::string& arch, json& j) {
  const std::string type_key = arch + ".rope.scaling.type";
  if (f.find(type_key) != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(std::string type, f.get_string(type_key));
    if (type == "none") return Status::Ok();
    json s = {{"rope_type", type}};
    if (f.find(arch + ".rope.scaling.factor") != nullptr) {
      TANDEM_ASSIGN_OR_RETURN(double factor, f.get_float(arch + ".rope.scaling.factor"));
      s["factor"] = factor;
    }
    j["rope_scaling"] = s;  // parse_config accepts linear and refuses yarn & co. naming the type
    return Status::Ok();
  }
  if (f.find(arch + ".rope.scale_linear") != nullptr) {  // the older spelling of linear scaling
    TANDEM_ASSIGN_OR_RETURN(double factor, f.get_float(arch + ".rope.scale_linear"));
    if (factor != 1.0) j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor}};
  }
  return Status::Ok();
}

}  // namespace

bool is_gguf_path(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return false;
  if (path.size() >= 5) {
    std::string ext = path.substr(path.size() - 5);
    for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (ext == ".gguf") return true;  // the GGUF reader then says what is wrong with it
  }
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

Expected<kernels::DType> gguf_kernel_dtype(uint32_t type_id, const std::string& tensor) {
  switch (static_cast<GgmlType>(type_id)) {
    case GgmlType::f32:
      return kernels::DType::f32;
    case GgmlType::f16:
      return kernels::DType::f16;
    case GgmlType::bf16:
      return kernels::DType::bf16;
    // Block types: PackedMatrix::pack takes the GGUF block rows as stored (docs/quantized.md).
    case GgmlType::q8_0:
      return kernels::DType::q8_0;
    case GgmlType::q4_0:
      return kernels::DType::q4_0;
    case GgmlType::q5_0:
      return kernels::DType::q5_0;
    case GgmlType::q4_k:
      return kernels::DType::q4_k;
    case GgmlType::q5_k:
      return kernels::DType::q5_k;
    case GgmlType::q6_k:
      return kernels::DType::q6_k;
    default:
      return unimplemented(
          "tensor " + tensor + " has type " + ggml_type_name(type_id) +
          ", which tandem does not load (supported: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K)");
  }
}

std::string hf_tensor_name(std::string_view name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (name.substr(0, 4) != "blk.") return "";
  const size_t dot = name.find('.', 4);
  if (dot == std::string_view::npos || dot == 4) return "";
  const std::string_view layer = name.substr(4, dot - 4);
  for (char ch : layer)
    if (ch < '0' || ch > '9') return "";
  std::string_view rest = name.substr(dot + 1);
  std::string_view suffix;
  for (std::string_view s : {std::string_view(".weight"), std::string_view(".bias")}) {
    if (rest.size() > s.size() && rest.substr(rest.size() - s.size()) == s) suffix = s;
  }
  if (suffix.empty()) return "";
  const std::string_view part = rest.substr(0, rest.size() - suffix.size());
  static constexpr std::pair<std::string_view, std::string_view> kParts[] = {
      {"attn_norm", "input_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"ffn_gate_inp", "mlp.gate"},
      {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},  // qwen2moe's shared expert
      {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
      {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
      {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
      // A sparse layer's experts stacked [experts][rows][cols] (gguf_checkpoint splits them).
      {"ffn_gate_exps", "mlp.experts.gate_proj"},
      {"ffn_up_exps", "mlp.experts.up_proj"},
      {"ffn_down_exps", "mlp.experts.down_proj"},
  };
  for (const auto& [gguf, hf] : kParts)
    if (part == gguf)
      return "model.layers." + std::string(layer) + "." + std::string(hf) + std::string(suffix);
  return "";
}

Expected<json> gguf_config_json(const GgufFile& f) {
  if (f.find("split.count") != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(int64_t splits, f.get_int("split.count"));
    if (splits > f.split_files())  // GgufFile::open joins the splits; an in-memory image cannot
      return invalid_argument(f.path() + ": one of " + std::to_string(splits) +
                              " split GGUF files (split.count) whose other splits were not opened");
  }
  TANDEM_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  const bool moe = arch == "qwen2moe" || arch == "qwen3moe";
  if (arch != "llama" && arch != "mistral" && arch != "qwen2" && arch != "qwen3" && !moe)
    return unimplemented(f.path() + ": general.architecture \"" + arch +
                         "\" is not supported (supported: llama, mistral, qwen2, qwen3, qwen2moe, qwen3moe)");
  json j = json::object();
  j["model_type"] = arch == "qwen3moe" ? "qwen3_moe" : arch == "qwen2moe" ? "qwen2_moe" : arch;
  j["hidden_act"] = "silu";
  const std::string a = arch + ".";
  TANDEM_RETURN_IF_ERROR(copy_int(f, a + "embedding_length", j, "hidden_size", true));
  TANDEM_RETURN_IF_ERROR(copy_int(f, a + "block_count", j, "num_hidden_layers", true));
  TANDEM_RETURN_IF_ERROR(copy_int(f, a + "feed_forward_length", j, "intermediate_size", !moe));
  TANDEM_RETURN_IF_ERROR(copy_int(f, a + "attention.head_count", j, "num_attention_heads", true));
  TANDEM_RETURN_IF_ERROR(copy_int(f, a + "attention.head_count_kv", j, "num_key_value_heads", false));
  TANDEM_RETURN_IF_ERROR(copy_int(f, a + "context_length", j, "max_position_embeddings", false));
  TANDEM_RETURN_IF_ERROR(copy_int(f, a + "attention.key_length", j, "head_dim", false));
  TANDEM_RETURN_IF_ERROR(copy_float(f, a + "attention.layer_norm_rms_epsilon", j, "rms_norm_eps"));
  TANDEM_RETURN_IF_ERROR(copy_float(f, a + "rope.freq_base", j, "rope_theta"));
  if (moe) {
    TANDEM_RETURN_IF_ERROR(copy_int(f, a + "expert_count", j, "num_experts", true));
    TANDEM_RETURN_IF_ERROR(copy_int(f, a + "expert_used_count", j, "num_experts_per_tok", true));
    TANDEM_RETURN_IF_ERROR(copy_int(f, a + "expert_feed_forward_length", j, "moe_intermediate_size", true));
    if (arch == "qwen2moe")
      TANDEM_RETURN_IF_ERROR(
          copy_int(f, a + "expert_shared_feed_forward_length", j, "shared_expert_intermediate_size", true));
    // llama.cpp's graphs renormalise the top-k weights for qwen3moe and not for qwen2moe.
    j["norm_topk_prob"] = arch == "qwen3moe";
    if (f.find(a + "expert_weights_norm") != nullptr) {
      TANDEM_ASSIGN_OR_RETURN(bool norm, f.get_bool(a + "expert_weights_norm"));
      j["norm_topk_prob"] = norm;
    }
    if (!j.contains("intermediate_size")) j["intermediate_size"] = j["moe_intermediate_size"];
    // A layer without a router is dense (transformers' mlp_only_layers; llama.cpp's
    // qwen3moe files have none).
    json dense = json::array();
    for (int64_t l = 0; l < j["num_hidden_layers"].get<int64_t>(); ++l)
      if (f.find_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight") == nullptr) dense.push_back(l);
    if (!dense.empty()) j["mlp_only_layers"] = dense;
  }
  const int64_t heads = j["num_attention_heads"].get<int64_t>();
  const int64_t head_dim = j.contains("head_dim") ? j["head_dim"].get<int64_t>()
                                                  : (heads > 0 ? j["hidden_size"].get<int64_t>() / heads : 0);
  for (const char* key : {"attention.value_length", "rope.dimension_count"}) {
    if (f.find(a + key) == nullptr) continue;
    TANDEM_ASSIGN_OR_RETURN(int64_t v, f.get_int(a + key));
    if (v != head_dim)
      return unimplemented(f.path() + ": metadata \"" + a + key + "\" (" + std::to_string(v) +
                           ") differs from the head dimension " + std::to_string(head_dim) +
                           "; only full-width RoPE with equal key and value sizes is supported");
  }
  if (arch == "llama" || arch == "mistral") {
    // A llama-architecture file with a window is a Mistral (transformers applies it to every layer);
    // one with experts a Mixtral (llama.cpp writes it so; the experts' width is feed_forward_length).
    TANDEM_RETURN_IF_ERROR(copy_int(f, a + "attention.sliding_window", j, "sliding_window", false));
    if (j.contains("sliding_window")) j["model_type"] = "mistral";
    if (f.find(a + "expert_count") != nullptr) {
      j["model_type"] = "mixtral";
      TANDEM_RETURN_IF_ERROR(copy_int(f, a + "expert_count", j, "num_local_experts", true));
      TANDEM_RETURN_IF_ERROR(copy_int(f, a + "expert_used_count", j, "num_experts_per_tok", true));
    }
  }
  TANDEM_RETURN_IF_ERROR(rope_scaling_json(f, arch, j));
  if (const GgufTensor* freqs = f.find_tensor("rope_freqs.weight")) {
    TANDEM_RETURN_IF_ERROR(fit_llama3_rope(f, *freqs, arch, head_dim, j.value("rope_theta", 10000.0), j));
  }
  if (const GgufTensor* embd = f.find_tensor("token_embd.weight");
      embd != nullptr && embd->dims.size() == 2) {
    j["vocab_size"] = embd->dims[1];
    if (const char* dtype = torch_dtype_of(embd->type)) j["torch_dtype"] = dtype;
  } else if (f.find(a + "vocab_size") != nullptr) {
    TANDEM_RETURN_IF_ERROR(copy_int(f, a + "vocab_size", j, "vocab_size", true));
  } else if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens"); tokens != nullptr) {
    j["vocab_size"] = tokens->count;
  }
  j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  if (arch != "qwen2" && arch != "qwen2moe") {  // qwen2 (and its MoE) always have q/k/v biases
    j["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;
    j["mlp_bias"] = f.find_tensor("blk.0.ffn_up.bias") != nullptr;
  }
  for (const auto& [key, field] : {std::pair{"tokenizer.ggml.eos_token_id", "eos_token_id"},
                                   std::pair{"tokenizer.ggml.bos_token_id", "bos_token_id"}}) {
    if (f.find(key) == nullptr) continue;
    TANDEM_ASSIGN_OR_RETURN(int64_t id, f.get_int(key));
    j[field] = id;
  }
  return j;
}

Expected<ModelConfig> gguf_config(const GgufFile& f) {
  TANDEM_ASSIGN_OR_RETURN(json j, gguf_config_json(f));
  return parse_config(j.dump(), f.path() + " (GGUF metadata as config.json)");
}

namespace {

// Mixtral's names for what hf_tensor_name calls the router and the experts'
// projections: block_sparse_moe.gate, block_sparse_moe.experts.{w1,w3,w2}.
std::string mixtral_name(std::string name) {
  const size_t at = name.find(".mlp.");
  if (at == std::string::npos ||
      (name.compare(at, 10, ".mlp.gate.") != 0 && name.compare(at, 13, ".mlp.experts.") != 0))
    return name;
  name.replace(at, 5, ".block_sparse_moe.");
  for (const auto& [hf, w] :
       {std::pair{"gate_proj.", "w1."}, std::pair{"up_proj.", "w3."}, std::pair{"down_proj.", "w2."}})
    if (const size_t p = name.find(hf); p != std::string::npos) name.replace(p, std::strlen(hf), w);
  return name;
}

}  // namespace

Expected<Checkpoint> gguf_checkpoint(std::shared_ptr<const GgufFile> file, const ModelConfig& config) {
  const GgufFile& f = *file;
  TANDEM_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  const bool mixtral = config.family == Family::mixtral;
  std::vector<TensorView> views;
  for (const GgufTensor& t : f.tensors()) {
    std::string name = hf_tensor_name(t.name);
    if (name.empty()) continue;
    if (mixtral) name = mixtral_name(std::move(name));
    constexpr std::string_view kExperts = ".experts.";
    if (const size_t at = name.find(kExperts); at != std::string::npos) {
      // A stack: one view per expert, its [rows][cols] slab (whole rows: every
      // block type's rows are contiguous within an expert).
      auto dtype = gguf_kernel_dtype(t.type, t.name);
      if (!dtype.ok()) return Status(dtype.status().code(), f.path() + ": " + dtype.status().message());
      const std::vector<int64_t> shape = t.shape();
      if (shape.size() != 3 || shape[0] <= 0 || t.bytes % static_cast<size_t>(shape[0]) != 0)
        return invalid_argument(f.path() + ": tensor \"" + t.name +
                                "\" must be a [experts][rows][cols] stack of whole experts");
      const size_t each = t.bytes / static_cast<size_t>(shape[0]);
      for (int64_t e = 0; e < shape[0]; ++e) {
        TensorView v;
        const size_t split = at + kExperts.size();  // "...experts." + E + ".P_proj.weight"
        v.name = name.substr(0, split) + std::to_string(e) + "." + name.substr(split);
        v.file = f.path() + " (GGUF tensor " + t.name + ", expert " + std::to_string(e) + ")";
        v.dtype = *dtype;
        v.shape = {shape[1], shape[2]};
        v.data = t.data + static_cast<size_t>(e) * each;
        v.bytes = each;
        views.push_back(std::move(v));
      }
      continue;
    }
    std::vector<int64_t> shape = t.shape();
    if (t.name.find(".ffn_gate_inp_shexp.") != std::string::npos && shape.size() == 1)
      shape.insert(shape.begin(), 1);  // llama.cpp keeps the shared expert's gate 1-D: HF's [1][hidden]
    auto dtype = gguf_kernel_dtype(t.type, t.name);
    if (!dtype.ok()) return Status(dtype.status().code(), f.path() + ": " + dtype.status().message());
    TensorView v;
    v.name = std::move(name);
    v.file = f.path() + " (GGUF tensor " + t.name + ")";  // errors name both spellings
    v.dtype = *dtype;
    v.shape = std::move(shape);
    v.data = t.data;
    v.bytes = t.bytes;
    const bool q_or_k =
        t.name.find(".attn_q.") != std::string::npos || t.name.find(".attn_k.") != std::string::npos;
    if (permuted_architecture(arch) && q_or_k) {
      if (v.shape[0] % config.head_dim != 0)
        return invalid_argument(f.path() + ": tensor \"" + t.name + "\" has " + std::to_string(v.shape[0]) +
                                " rows, not a multiple of the head dimension " +
                                std::to_string(config.head_dim));
      v.rope_group_rows = config.head_dim;
    }
    views.push_back(std::move(v));
  }
  const GgufFile* mapped = file.get();
  return Checkpoint::from_views(f.path(), std::move(views), std::move(file),
                                [mapped] { mapped->drop_resident_pages(); });
}

}  // namespace tandem::model
