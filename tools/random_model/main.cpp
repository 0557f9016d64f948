// tandem-random-model: writes config.json + model.safetensors with random
// weights at the shapes of a real checkpoint, for benchmarks.
//
//   tandem-random-model --preset qwen2.5-0.5b --out /tmp/qwen05b [--dtype bf16|f16|f32] [--layers N]
//                       [--experts N]   (MoE presets: fewer experts, same bytes per token)
//
// Weights are uniform with the std of a trained model's init (0.02); norms
// are 1. The safetensors file is streamed tensor by tensor, so memory stays
// small at any size. config.json uses the classic (transformers 4.x) form.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtype_convert.h"
#include "kernels/ops.h"

namespace {

// The weights' stored type: its names in config.json and the safetensors header.
struct WeightType {
  tandem::kernels::DType dtype;  // f32, f16 or bf16
  const char* torch;
  const char* safetensors;
};

using json = nlohmann::json;

struct Preset {
  const char* name;
  const char* model_type;
  int64_t vocab, hidden, intermediate;
  int layers, heads, kv_heads, head_dim;
  double rope_theta, eps;
  bool tied, qkv_bias, qk_norm;
  json rope_scaling;
  // Sparse MoE (qwen3_moe): every layer has `experts` experts of width moe_intermediate.
  int experts = 0, top_k = 0;
  int64_t moe_intermediate = 0;
  // gemma4_text (docs/adr/0036-gemma4-text.md): every full_every-th layer is full
  // attention with global_head_dim (and global_kv_heads when k_eq_v); the last
  // shared_layers layers reuse K/V; per_layer_input > 0 adds per-layer inputs;
  // experts > 0 adds the MoE block beside the MLP.
  int full_every = 0, global_head_dim = 0, global_kv_heads = 0, shared_layers = 0;
  bool k_eq_v = false, double_wide = false;
  int64_t per_layer_input = 0;
};

bool is_gemma4(const Preset& p) { return std::string(p.model_type) == "gemma4_text"; }
bool full_layer(const Preset& p, int i) { return (i + 1) % p.full_every == 0 || i == p.layers - 1; }

std::vector<Preset> presets() {
  json llama3 = {{"rope_type", "llama3"},
                 {"factor", 32.0},
                 {"low_freq_factor", 1.0},
                 {"high_freq_factor", 4.0},
                 {"original_max_position_embeddings", 8192}};
  json llama31 = llama3;
  llama31["factor"] = 8.0;
  return {
      {"qwen2.5-0.5b", "qwen2", 151936, 896, 4864, 24, 14, 2, 64, 1e6, 1e-6, true, true, false, nullptr},
      {"qwen2.5-1.5b", "qwen2", 151936, 1536, 8960, 28, 12, 2, 128, 1e6, 1e-6, true, true, false, nullptr},
      {"qwen3-0.6b", "qwen3", 151936, 1024, 3072, 28, 16, 8, 128, 1e6, 1e-6, true, false, true, nullptr},
      {"llama-3.2-1b", "llama", 128256, 2048, 8192, 16, 32, 8, 64, 500000.0, 1e-5, true, false, false,
       llama3},
      {"llama-3.1-8b", "llama", 128256, 4096, 14336, 32, 32, 8, 128, 500000.0, 1e-5, false, false, false,
       llama31},
      {"mistral-7b", "mistral", 32768, 4096, 14336, 32, 32, 8, 128, 1e6, 1e-5, false, false, false, nullptr},
      {"gemma-2-2b", "gemma2", 256000, 2304, 9216, 26, 8, 4, 256, 10000.0, 1e-6, true, false, false, nullptr},
      {"qwen3-30b-a3b", "qwen3_moe", 151936, 2048, 6144, 48, 32, 4, 128, 1e6, 1e-6, false, false, true,
       nullptr, 128, 8, 768},
      // Shapes chosen to resemble the Gemma 4 family (not copied from a published
      // config): a small dense model with per-layer inputs and KV sharing, and a
      // sparse one with attention_k_eq_v.
      {"gemma4-dense", "gemma4_text", 262144, 1536, 6144, 35, 8,   1, 256, 1e6,   1e-6, true, false,
       true,           nullptr,       0,      0,    0,    5,  512, 0, 20,  false, true, 256},
      {"gemma4-moe", "gemma4_text", 262144, 2816, 2112, 30, 16,  8, 256, 1e6,  1e-6,  true, false,
       true,         nullptr,       128,    8,    704,  6,  512, 2, 0,   true, false, 0},
  };
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  bool ones = false;  // norm weights
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

std::vector<Tensor> gemma4_tensor_list(const Preset& p) {
  std::vector<Tensor> t;
  const int64_t h = p.hidden;
  t.push_back({"model.embed_tokens.weight", {p.vocab, h}});
  const int first_shared = p.layers - p.shared_layers;
  for (int i = 0; i < p.layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    const bool full = full_layer(p, i), shared = i >= first_shared;
    const int64_t hd = full ? p.global_head_dim : p.head_dim;
    const int64_t kv = (full && p.k_eq_v ? p.global_kv_heads : p.kv_heads) * hd;
    const int64_t q = int64_t{p.heads} * hd, inter = p.intermediate * (shared && p.double_wide ? 2 : 1);
    t.push_back({l + "layer_scalar", {1}, true});
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                          "post_feedforward_layernorm"})
      t.push_back({l + n + ".weight", {h}, true});
    t.push_back({l + "self_attn.q_proj.weight", {q, h}});
    t.push_back({l + "self_attn.q_norm.weight", {hd}, true});
    if (!shared) {
      t.push_back({l + "self_attn.k_proj.weight", {kv, h}});
      t.push_back({l + "self_attn.k_norm.weight", {hd}, true});
      if (!(full && p.k_eq_v)) t.push_back({l + "self_attn.v_proj.weight", {kv, h}});
    }
    t.push_back({l + "self_attn.o_proj.weight", {h, q}});
    t.push_back({l + "mlp.gate_proj.weight", {inter, h}});
    t.push_back({l + "mlp.up_proj.weight", {inter, h}});
    t.push_back({l + "mlp.down_proj.weight", {h, inter}});
    if (p.per_layer_input > 0) {
      t.push_back({l + "per_layer_input_gate.weight", {p.per_layer_input, h}});
      t.push_back({l + "per_layer_projection.weight", {h, p.per_layer_input}});
      t.push_back({l + "post_per_layer_input_norm.weight", {h}, true});
    }
    if (p.experts > 0) {
      t.push_back({l + "router.proj.weight", {p.experts, h}});
      t.push_back({l + "router.scale", {h}, true});
      t.push_back({l + "router.per_expert_scale", {p.experts}, true});
      t.push_back({l + "experts.gate_up_proj", {p.experts, 2 * p.moe_intermediate, h}});
      t.push_back({l + "experts.down_proj", {p.experts, h, p.moe_intermediate}});
      for (const char* n :
           {"pre_feedforward_layernorm_2", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"})
        t.push_back({l + n + ".weight", {h}, true});
    }
  }
  if (p.per_layer_input > 0) {
    const int64_t total = p.per_layer_input * p.layers;
    t.push_back({"model.embed_tokens_per_layer.weight", {p.vocab, total}});
    t.push_back({"model.per_layer_model_projection.weight", {total, h}});
    t.push_back({"model.per_layer_projection_norm.weight", {p.per_layer_input}, true});
  }
  t.push_back({"model.norm.weight", {h}, true});
  return t;
}

json gemma4_config(const Preset& p, const WeightType& wt) {
  json types = json::array();
  json plc = json::object();
  for (int i = 0; i < p.layers; ++i) {
    types.push_back(full_layer(p, i) ? "full_attention" : "sliding_attention");
    if (!full_layer(p, i)) continue;
    plc[std::to_string(i)] = {{"head_dim", p.global_head_dim}};
    if (p.k_eq_v) plc[std::to_string(i)]["num_key_value_heads"] = p.global_kv_heads;
  }
  json c = {
      {"architectures", {"Gemma4ForCausalLM"}},
      {"model_type", p.model_type},
      {"vocab_size", p.vocab},
      {"hidden_size", p.hidden},
      {"intermediate_size", p.intermediate},
      {"num_hidden_layers", p.layers},
      {"num_attention_heads", p.heads},
      {"num_key_value_heads", p.kv_heads},
      {"head_dim", p.head_dim},
      {"per_layer_config", plc},
      {"layer_types", types},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"max_position_embeddings", 131072},
      {"rms_norm_eps", p.eps},
      {"sliding_window", 512},
      {"final_logit_softcapping", 30.0},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
        {"full_attention",
         {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", p.rope_theta}}}}},
      {"attention_k_eq_v", p.k_eq_v},
      {"num_kv_shared_layers", p.shared_layers},
      {"use_double_wide_mlp", p.double_wide},
      {"hidden_size_per_layer_input", p.per_layer_input},
      {"vocab_size_per_layer_input", p.vocab},
      {"enable_moe_block", p.experts > 0},
      {"tie_word_embeddings", p.tied},
      {"dtype", wt.torch},
      {"bos_token_id", 2},
      {"eos_token_id", 1}};
  if (p.experts > 0) {
    c["num_experts"] = p.experts;
    c["top_k_experts"] = p.top_k;
    c["moe_intermediate_size"] = p.moe_intermediate;
  }
  return c;
}

std::vector<Tensor> tensor_list(const Preset& p) {
  if (is_gemma4(p)) return gemma4_tensor_list(p);
  std::vector<Tensor> t;
  const int64_t q = int64_t{p.heads} * p.head_dim, kv = int64_t{p.kv_heads} * p.head_dim;
  t.push_back({"model.embed_tokens.weight", {p.vocab, p.hidden}});
  for (int i = 0; i < p.layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    t.push_back({l + "input_layernorm.weight", {p.hidden}, true});
    t.push_back({l + "self_attn.q_proj.weight", {q, p.hidden}});
    t.push_back({l + "self_attn.k_proj.weight", {kv, p.hidden}});
    t.push_back({l + "self_attn.v_proj.weight", {kv, p.hidden}});
    if (p.qkv_bias) {
      t.push_back({l + "self_attn.q_proj.bias", {q}});
      t.push_back({l + "self_attn.k_proj.bias", {kv}});
      t.push_back({l + "self_attn.v_proj.bias", {kv}});
    }
    if (p.qk_norm) {
      t.push_back({l + "self_attn.q_norm.weight", {p.head_dim}, true});
      t.push_back({l + "self_attn.k_norm.weight", {p.head_dim}, true});
    }
    t.push_back({l + "self_attn.o_proj.weight", {p.hidden, q}});
    t.push_back({l + "post_attention_layernorm.weight", {p.hidden}, true});
    if (std::string(p.model_type) == "gemma2") {
      t.push_back({l + "pre_feedforward_layernorm.weight", {p.hidden}, true});
      t.push_back({l + "post_feedforward_layernorm.weight", {p.hidden}, true});
    }
    if (p.experts > 0) {
      t.push_back({l + "mlp.gate.weight", {p.experts, p.hidden}});
      for (int e = 0; e < p.experts; ++e) {
        const std::string x = l + "mlp.experts." + std::to_string(e) + ".";
        t.push_back({x + "gate_proj.weight", {p.moe_intermediate, p.hidden}});
        t.push_back({x + "up_proj.weight", {p.moe_intermediate, p.hidden}});
        t.push_back({x + "down_proj.weight", {p.hidden, p.moe_intermediate}});
      }
      continue;
    }
    t.push_back({l + "mlp.gate_proj.weight", {p.intermediate, p.hidden}});
    t.push_back({l + "mlp.up_proj.weight", {p.intermediate, p.hidden}});
    t.push_back({l + "mlp.down_proj.weight", {p.hidden, p.intermediate}});
  }
  t.push_back({"model.norm.weight", {p.hidden}, true});
  if (!p.tied) t.push_back({"lm_head.weight", {p.vocab, p.hidden}});
  return t;
}

json make_config(const Preset& p, const WeightType& wt) {
  if (is_gemma4(p)) return gemma4_config(p, wt);
  json c = {{"architectures",
             {std::string(p.model_type) == "qwen2"    ? "Qwen2ForCausalLM"
              : std::string(p.model_type) == "qwen3"  ? "Qwen3ForCausalLM"
              : std::string(p.model_type) == "llama"  ? "LlamaForCausalLM"
              : p.experts > 0                         ? "Qwen3MoeForCausalLM"
              : std::string(p.model_type) == "gemma2" ? "Gemma2ForCausalLM"
                                                      : "MistralForCausalLM"}},
            {"model_type", p.model_type},
            {"vocab_size", p.vocab},
            {"hidden_size", p.hidden},
            {"intermediate_size", p.intermediate},
            {"num_hidden_layers", p.layers},
            {"num_attention_heads", p.heads},
            {"num_key_value_heads", p.kv_heads},
            {"head_dim", p.head_dim},
            {"hidden_act", "silu"},
            {"max_position_embeddings", 32768},
            {"rms_norm_eps", p.eps},
            {"rope_theta", p.rope_theta},
            {"rope_scaling", p.rope_scaling},
            {"tie_word_embeddings", p.tied},
            {"torch_dtype", wt.torch},
            {"bos_token_id", 1},
            {"eos_token_id", 2}};
  if (std::string(p.model_type) == "qwen2" || std::string(p.model_type) == "qwen3")
    c["use_sliding_window"] = false;
  if (std::string(p.model_type) == "gemma2") {
    // Gemma 2 2B's published values (norm weights "ones" here mean a factor 2: Gemma applies 1 + w).
    c.erase("hidden_act");
    c["hidden_activation"] = "gelu_pytorch_tanh";
    c["query_pre_attn_scalar"] = 256;
    c["attn_logit_softcapping"] = 50.0;
    c["final_logit_softcapping"] = 30.0;
    c["sliding_window"] = 4096;
  }
  if (p.experts > 0) {
    c["num_experts"] = p.experts;
    c["num_experts_per_tok"] = p.top_k;
    c["moe_intermediate_size"] = p.moe_intermediate;
    c["norm_topk_prob"] = true;
    c["use_sliding_window"] = false;
  }
  return c;
}

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int write_model(const Preset& p, const std::string& out, const WeightType& wt, uint64_t seed) {
  namespace fs = std::filesystem;
  fs::create_directories(out);
  {
    std::FILE* f = std::fopen((fs::path(out) / "config.json").c_str(), "w");
    if (!f)
      return std::fprintf(stderr, "cannot write %s/config.json: %s\n", out.c_str(), std::strerror(errno)), 1;
    std::string text = make_config(p, wt).dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  const auto tensors = tensor_list(p);
  const size_t elem = tandem::kernels::dtype_size(wt.dtype);
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t bytes = static_cast<uint64_t>(t.numel()) * elem;
    header[t.name] = {
        {"dtype", wt.safetensors}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  const std::string path = (fs::path(out) / "model.safetensors").string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(), std::strerror(errno)), 1;
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  uint64_t state = seed;
  std::vector<uint8_t> chunk(1 << 22);
  const float scale = 0.02f * 1.7320508f;  // uniform(-a, a) with std 0.02
  for (const auto& t : tensors) {
    int64_t left = t.numel();
    while (ok && left > 0) {
      const int64_t n = std::min<int64_t>(left, static_cast<int64_t>(chunk.size() / elem));
      for (int64_t i = 0; i < n; ++i) {
        float v = t.ones ? 1.0f : scale * (static_cast<float>(splitmix(state) >> 40) / 8388608.0f - 1.0f);
        if (wt.dtype == tandem::kernels::DType::f32) {
          std::memcpy(chunk.data() + 4 * i, &v, 4);
        } else {
          const uint16_t b = wt.dtype == tandem::kernels::DType::f16 ? tandem::kernels::f32_to_f16(v)
                                                                     : tandem::kernels::f32_to_bf16(v);
          std::memcpy(chunk.data() + 2 * i, &b, 2);
        }
      }
      ok = std::fwrite(chunk.data(), 1, static_cast<size_t>(n) * elem, f) == static_cast<size_t>(n) * elem;
      left -= n;
    }
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return std::fprintf(stderr, "write failed: %s: %s\n", path.c_str(), std::strerror(errno)), 1;
  std::printf("wrote %s: %s shapes, %zu tensors, %.1f MB\n", out.c_str(), p.name, tensors.size(),
              (8 + text.size() + offset) / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a random-weight Hugging Face model directory at real shapes"};
  std::string preset_name, out, dtype = "bf16";
  int layers = 0;
  uint64_t seed = 1;
  std::string names;
  for (const auto& p : presets()) names += std::string(names.empty() ? "" : ", ") + p.name;
  app.add_option("--preset", preset_name, "One of: " + names)->required();
  app.add_option("--out", out, "Output directory")->required();
  app.add_option("--dtype", dtype, "bf16, f16 or f32")->check(CLI::IsMember({"bf16", "f16", "f32"}));
  app.add_option("--layers", layers, "Override the layer count (0 = the preset's)")
      ->check(CLI::Range(0, 1024));
  int experts = 0;
  app.add_option("--experts", experts, "MoE presets: override the expert count (0 = the preset's; >= top-k)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--seed", seed, "Random seed");
  CLI11_PARSE(app, argc, argv);
  for (auto p : presets()) {
    if (preset_name != p.name) continue;
    if (layers > 0) {
      // gemma4: keep the preset's share of KV-shared layers.
      p.shared_layers = static_cast<int>(static_cast<int64_t>(p.shared_layers) * layers / p.layers);
      p.layers = layers;
    }
    if (experts > 0 && p.experts > 0) {
      if (experts < p.top_k) return std::fprintf(stderr, "--experts must be >= %d\n", p.top_k), 2;
      p.experts = experts;
    }
    using tandem::kernels::DType;
    const WeightType wt = dtype == "f32"   ? WeightType{DType::f32, "float32", "F32"}
                          : dtype == "f16" ? WeightType{DType::f16, "float16", "F16"}
                                           : WeightType{DType::bf16, "bfloat16", "BF16"};
    return write_model(p, out, wt, seed);
  }
  std::fprintf(stderr, "unknown preset \"%s\" (known: %s)\n", preset_name.c_str(), names.c_str());
  return 2;
}
