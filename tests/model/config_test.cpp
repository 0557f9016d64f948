#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tandem::model {
namespace {

using nlohmann::json;
using Kind = kernels::RopeScaling::Kind;

json base(const char* type) {
  return json{{"model_type", type},       {"vocab_size", 100},      {"hidden_size", 64},
              {"intermediate_size", 128}, {"num_hidden_layers", 3}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"rms_norm_eps", 1e-5}};
}

Expected<ModelConfig> parse(const json& j) { return parse_config(j.dump(), "/m/config.json"); }

TEST(Config, ClassicAndV5FormsAgree) {
  json classic = base("llama");
  classic["rope_theta"] = 500000.0;
  classic["rope_scaling"] = {{"rope_type", "llama3"},
                             {"factor", 32.0},
                             {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}};
  classic["torch_dtype"] = "bfloat16";
  json v5 = base("llama");
  v5["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                           {"factor", 32.0},          {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  v5["dtype"] = "float16";
  for (const json& j : {classic, v5}) {
    auto c = parse(j);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->rope_theta, 500000.0);
    EXPECT_EQ(c->rope_scaling.kind, Kind::llama3);
    EXPECT_EQ(c->rope_scaling.factor, 32.0);
    EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0);
    EXPECT_EQ(c->rope_scaling.original_max_position, 8192.0);
    EXPECT_EQ(c->head_dim, 16);
    EXPECT_EQ(c->num_kv_heads, 2);
    EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  }
  EXPECT_EQ(parse(classic)->declared_dtype, kernels::DType::bf16);
  EXPECT_EQ(parse(v5)->declared_dtype, kernels::DType::f16);
}

TEST(Config, LinearScalingWithLegacyTypeKey) {
  json j = base("llama");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->rope_scaling.kind, Kind::linear);
  EXPECT_EQ(c->rope_theta, 10000.0);
}

TEST(Config, FamilyFeatures) {
  json q2 = base("qwen2");
  q2["tie_word_embeddings"] = true;
  q2["sliding_window"] = 32768;
  q2["use_sliding_window"] = false;
  auto c = parse(q2);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->o_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->layer_window, (std::vector<int>{0, 0, 0}));

  q2["use_sliding_window"] = true;
  q2["max_window_layers"] = 1;
  EXPECT_EQ(parse(q2)->layer_window, (std::vector<int>{0, 32768, 32768}));

  json q3 = base("qwen3");
  q3["head_dim"] = 128;
  c = parse(q3);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->q_dim(), 512);

  json mi = base("mistral");
  mi["sliding_window"] = 4096;
  EXPECT_EQ(parse(mi)->layer_window, (std::vector<int>{4096, 4096, 4096}));
  mi["sliding_window"] = nullptr;
  EXPECT_EQ(parse(mi)->layer_window, (std::vector<int>{0, 0, 0}));

  json lt = base("qwen3");
  lt["sliding_window"] = 8;
  lt["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  EXPECT_EQ(parse(lt)->layer_window, (std::vector<int>{0, 8, 0}));

  json ll = base("llama");
  ll["attention_bias"] = true;
  ll["mlp_bias"] = true;
  ll["eos_token_id"] = {1, 2};
  c = parse(ll);
  EXPECT_TRUE(c->qkv_bias && c->o_bias && c->mlp_bias);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1, 2}));
}

TEST(Config, UnsupportedModelTypeListsSupported) {
  auto c = parse(base("gpt2"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("gpt2"), std::string::npos);
  EXPECT_NE(c.status().message().find("llama, mistral, qwen2, qwen3"), std::string::npos);
  EXPECT_NE(c.status().message().find("/m/config.json"), std::string::npos);
}

TEST(Config, ErrorsNameTheField) {
  json j = base("llama");
  j.erase("hidden_size");
  auto c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("\"hidden_size\" is missing"), std::string::npos)
      << c.status().message();

  j = base("llama");
  j["num_key_value_heads"] = 3;
  EXPECT_NE(parse(j).status().message().find("num_key_value_heads"), std::string::npos);

  j = base("llama");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("yarn"), std::string::npos);

  j = base("llama");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_NE(parse(j).status().message().find("low_freq_factor"), std::string::npos);

  j = base("llama");
  j["hidden_act"] = "gelu";
  EXPECT_NE(parse(j).status().message().find("hidden_act"), std::string::npos);

  j = base("llama");
  j["vocab_size"] = "many";
  EXPECT_NE(parse(j).status().message().find("vocab_size"), std::string::npos);

  EXPECT_NE(parse_config("{oops", "/m/config.json").status().message().find("/m/config.json"),
            std::string::npos);
}

// One case per class of bad input: the error names the file and the field.
struct BadConfig {
  const char* what;
  json patch;          // merged into base("llama") (null values erase nothing: they are set)
  const char* needle;  // must appear in the message
};

TEST(Config, EachClassOfBadInputNamesTheField) {
  const json big = uint64_t{1} << 40;
  const std::vector<BadConfig> cases = {
      {"negative size", {{"hidden_size", -64}}, "\"hidden_size\" (-64) must be >= 1"},
      {"zero size", {{"intermediate_size", 0}}, "\"intermediate_size\" (0) must be >= 1"},
      {"zero layers", {{"num_hidden_layers", 0}}, "\"num_hidden_layers\""},
      {"huge vocab", {{"vocab_size", big}}, "\"vocab_size\" (1099511627776) must be at most"},
      {"huge hidden", {{"hidden_size", int64_t{1} << 20}}, "\"hidden_size\""},
      {"huge intermediate", {{"intermediate_size", int64_t{1} << 40}}, "\"intermediate_size\""},
      {"huge layers", {{"num_hidden_layers", 100000}}, "\"num_hidden_layers\" (100000) must be at most 1024"},
      {"huge heads", {{"num_attention_heads", 1 << 20}}, "\"num_attention_heads\""},
      {"uint64 beyond int64", {{"vocab_size", UINT64_MAX}}, "\"vocab_size\" (18446744073709551615)"},
      {"heads do not divide",
       {{"num_key_value_heads", 3}},
       "\"num_key_value_heads\" (3) must divide num_attention_heads (4)"},
      {"kv heads above heads", {{"num_key_value_heads", 8}}, "\"num_key_value_heads\" (8) must divide"},
      {"zero kv heads", {{"num_key_value_heads", 0}}, "\"num_key_value_heads\" (0) must be >= 1"},
      {"hidden not a multiple of heads", {{"hidden_size", 66}}, "\"hidden_size\" (66) is not a multiple"},
      {"odd head_dim", {{"head_dim", 15}}, "\"head_dim\" (15) must be even"},
      {"huge head_dim", {{"head_dim", 4096}}, "\"head_dim\" (4096) must be at most 512"},
      {"derived head_dim odd", {{"hidden_size", 60}}, "\"head_dim\" (15) must be even"},
      {"negative max positions", {{"max_position_embeddings", -1}}, "\"max_position_embeddings\""},
      {"huge max positions", {{"max_position_embeddings", int64_t{1} << 40}}, "\"max_position_embeddings\""},
      {"string size", {{"hidden_size", "64"}}, "\"hidden_size\" must be an integer, got a string"},
      {"float size", {{"vocab_size", 100.5}}, "\"vocab_size\" must be an integer, got a number"},
      {"array size",
       {{"num_attention_heads", {4}}},
       "\"num_attention_heads\" must be an integer, got an array"},
      {"bool flag as string",
       {{"tie_word_embeddings", "yes"}},
       "\"tie_word_embeddings\" must be true or false"},
      {"zero eps", {{"rms_norm_eps", 0}}, "\"rms_norm_eps\""},
      {"negative eps", {{"rms_norm_eps", -1e-5}}, "\"rms_norm_eps\""},
      {"eps above one", {{"rms_norm_eps", 2.0}}, "\"rms_norm_eps\" (2.0) must be at most 1.0"},
      {"eps as string", {{"rms_norm_eps", "1e-5"}}, "\"rms_norm_eps\" must be a number"},
      {"zero rope_theta", {{"rope_theta", 0}}, "\"rope_theta\" (0) must be > 0"},
      {"huge rope_theta", {{"rope_theta", 1e300}}, "\"rope_theta\""},
      {"rope_scaling not an object", {{"rope_scaling", "linear"}}, "\"rope_scaling\" must be an object"},
      {"rope type not a string",
       {{"rope_scaling", {{"rope_type", 3}}}},
       "\"rope_scaling.rope_type\" must be a string"},
      {"zero rope factor",
       {{"rope_scaling", {{"type", "linear"}, {"factor", 0}}}},
       "\"rope_scaling.factor\""},
      {"null rope factor",
       {{"rope_scaling", {{"type", "linear"}, {"factor", nullptr}}}},
       "\"rope_scaling.factor\" is missing"},
      {"llama3 freq factors reversed",
       {{"rope_scaling",
         {{"rope_type", "llama3"},
          {"factor", 8.0},
          {"low_freq_factor", 4.0},
          {"high_freq_factor", 1.0},
          {"original_max_position_embeddings", 8192}}}},
       "high_freq_factor > low_freq_factor"},
      {"llama3 negative original positions",
       {{"rope_scaling",
         {{"rope_type", "llama3"},
          {"factor", 8.0},
          {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", -5}}}},
       "\"rope_scaling.original_max_position_embeddings\""},
      {"rope_parameters theta negative",
       {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", -1.0}}}},
       "\"rope_parameters.rope_theta\""},
      {"partial rotary as string",
       {{"rope_scaling", {{"partial_rotary_factor", "half"}}}},
       "\"rope_scaling.partial_rotary_factor\" must be a number"},
      {"huge sliding window", {{"sliding_window", int64_t{1} << 40}}, "\"sliding_window\""},
      {"zero sliding window", {{"sliding_window", 0}}, "\"sliding_window\" (0) must be >= 1"},
      {"layer_types wrong length", {{"layer_types", {"full_attention"}}}, "\"layer_types\""},
      {"layer_types bad entry",
       {{"layer_types", {"full_attention", 7, "full_attention"}}},
       "\"layer_types\""},
      {"negative eos", {{"eos_token_id", -1}}, "\"eos_token_id\" (-1) must be a token id"},
      {"eos beyond int32", {{"eos_token_id", {2, int64_t{1} << 33}}}, "\"eos_token_id\" (8589934592)"},
      {"eos as string", {{"eos_token_id", "</s>"}}, "\"eos_token_id\" must be an integer"},
      {"negative bos", {{"bos_token_id", -3}}, "\"bos_token_id\" (-3)"},
      {"dtype unknown", {{"torch_dtype", "int4"}}, "\"torch_dtype\""},
      {"model_type not a string", {{"model_type", 7}}, "\"model_type\""},
  };
  for (const auto& bad : cases) {
    json j = base("llama");
    for (auto it = bad.patch.begin(); it != bad.patch.end(); ++it) j[it.key()] = it.value();
    auto c = parse(j);
    ASSERT_FALSE(c.ok()) << bad.what;
    EXPECT_NE(c.status().message().find(bad.needle), std::string::npos)
        << bad.what << ": " << c.status().message();
    EXPECT_NE(c.status().message().find("/m/config.json"), std::string::npos) << bad.what;
  }
}

TEST(Config, MaxWindowLayersBeyondTheLayersMeansNoSlidingLayer) {
  json j = base("qwen2");
  j["sliding_window"] = 16;
  j["use_sliding_window"] = true;
  j["max_window_layers"] = int64_t{1} << 32;  // used to wrap to a negative int and index before the vector
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->layer_window, (std::vector<int>{0, 0, 0}));
}

// Every field of every fixture's config set to each hostile value: parse_config
// returns (a config or an error naming the file), never crashes, throws or hangs.
TEST(Config, NoHostileValueCrashes) {
  const std::vector<json> hostile = {nullptr,
                                     -1,
                                     0,
                                     1,
                                     3,
                                     INT64_MIN,
                                     INT64_MAX,
                                     UINT64_MAX,
                                     int64_t{1} << 31,
                                     1e308,
                                     -1e308,
                                     1e-320,
                                     0.5,
                                     true,
                                     "",
                                     "llama3",
                                     json::array(),
                                     json::array({1, "x", nullptr}),
                                     json::object(),
                                     json{{"rope_type", "llama3"}, {"factor", -1}},
                                     json{{"full_attention", {{"rope_theta", 1}}}}};
  int checked = 0, accepted = 0;
  for (const auto& name : testing::fixture_names()) {
    const json fixture = json::parse(testing::read_file(testing::fixture_path(name) + "/config.json"));
    for (auto field = fixture.begin(); field != fixture.end(); ++field) {
      for (const json& value : hostile) {
        json j = fixture;
        j[field.key()] = value;
        auto c = parse(j);
        ++checked;
        if (c.ok()) {
          ++accepted;
          EXPECT_GT(c->head_dim, 0);
          EXPECT_EQ(c->layer_window.size(), static_cast<size_t>(c->num_layers));
          continue;
        }
        EXPECT_NE(c.status().message().find("/m/config.json"), std::string::npos)
            << name << "." << field.key() << " = " << value.dump() << ": " << c.status().message();
      }
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(accepted, 0);  // e.g. a null optional field
  // Not JSON, not an object, truncated.
  for (const char* text : {"", "[]", "null", "{\"model_type\":", "\xff\xfe", "{\"model_type\":\"llama\"}"})
    EXPECT_FALSE(parse_config(text, "/m/config.json").ok()) << text;
}

TEST(Config, MissingConfigFile) {
  auto c = load_config("/nonexistent/tandem_model");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/tandem_model/config.json"), std::string::npos);
}

TEST(Config, EveryFixtureParses) {
  auto names = testing::fixture_names();
  ASSERT_GE(names.size(), 10u);
  for (const auto& name : names) {
    auto c = load_config(testing::fixture_path(name));
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().to_string();
  }
  auto mistral = load_config(testing::fixture_path("mistral_sliding_bf16"));
  EXPECT_EQ(mistral->layer_window, (std::vector<int>{16, 16}));
  auto l3 = load_config(testing::fixture_path("llama3_rope_v5_f32"));
  EXPECT_EQ(l3->rope_scaling.kind, Kind::llama3);
  EXPECT_EQ(l3->num_kv_heads, 1);
}

}  // namespace
}  // namespace tandem::model
