// Request defaults: per field, the request beats the server's flags, which beat
// generation_config.json, which beats the built-in (OpenAI's); the flags'
// ranges are checked and a generation_config.json value out of the API's
// range is left out.
#include "server/request_defaults.h"

#include <gtest/gtest.h>

#include "server/openai_request.h"

namespace tandem::server {
namespace {

runtime::GenerationDefaults model_file() {
  runtime::GenerationDefaults g;
  g.temperature = 0.6f;
  g.top_p = 0.9f;
  g.top_k = 20;
  g.repetition_penalty = 1.1f;
  g.max_new_tokens = 5;
  g.do_sample = false;  // not applied (vLLM's rule)
  return g;
}

TEST(RequestDefaults, BuiltInWhenNothingIsSet) {
  const RequestDefaults d = resolve_request_defaults({}, {});
  const sampling::SamplingParams builtin;
  EXPECT_EQ(d.sampling.temperature, builtin.temperature);
  EXPECT_EQ(d.sampling.top_k, 0);
  EXPECT_EQ(d.sampling.top_p, 1.0f);
  EXPECT_FALSE(d.max_tokens);
  EXPECT_FALSE(d.seed);
  EXPECT_NE(d.description.find("max_tokens=up to the context (built-in)"), std::string::npos)
      << d.description;
}

TEST(RequestDefaults, GenerationConfigFillsWhatTheFlagsLeave) {
  ServerSamplingFlags flags;
  flags.top_p = 0.5f;
  flags.seed = 42;
  const RequestDefaults d = resolve_request_defaults(flags, model_file());
  EXPECT_FLOAT_EQ(d.sampling.temperature, 0.6f);  // generation_config.json (do_sample false ignored)
  EXPECT_FLOAT_EQ(d.sampling.top_p, 0.5f);        // the flag
  EXPECT_EQ(d.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(d.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(d.max_tokens, std::optional<int64_t>(5));
  EXPECT_EQ(d.seed, std::optional<uint64_t>(42));
  EXPECT_NE(d.description.find("temperature=0.6 (generation_config.json)"), std::string::npos)
      << d.description;
  EXPECT_NE(d.description.find("top_p=0.5 (--top-p)"), std::string::npos) << d.description;
  EXPECT_NE(d.description.find("max_tokens=5 (generation_config.json max_new_tokens)"), std::string::npos);
}

TEST(RequestDefaults, UnlimitedAndRandomFlagsBeatTheFile) {
  ServerSamplingFlags flags;
  flags.max_tokens = kUnlimitedTokens;
  flags.seed = kRandomSeed;
  const RequestDefaults d = resolve_request_defaults(flags, model_file());
  EXPECT_FALSE(d.max_tokens);
  EXPECT_FALSE(d.seed);
}

TEST(RequestDefaults, OutOfRangeFileValuesAreLeftOut) {
  runtime::GenerationDefaults g;
  g.temperature = 3.0f;  // the API accepts 0..2
  const RequestDefaults d = resolve_request_defaults({}, g);
  EXPECT_EQ(d.sampling.temperature, sampling::SamplingParams{}.temperature);
}

TEST(RequestDefaults, FlagRangesNameTheFlag) {
  ServerSamplingFlags t;
  t.temperature = 5;
  ASSERT_TRUE(check_server_sampling_flags(t));
  EXPECT_EQ(check_server_sampling_flags(t)->rfind("--temp 5: ", 0), 0u) << *check_server_sampling_flags(t);
  ServerSamplingFlags n;
  n.max_tokens = 0;
  EXPECT_TRUE(check_server_sampling_flags(n));
  ServerSamplingFlags ok;
  ok.temperature = 0;
  ok.max_tokens = -1;
  ok.seed = -1;
  EXPECT_FALSE(check_server_sampling_flags(ok));
}

TEST(RequestDefaults, TheRequestsOwnFieldsWin) {
  const RequestDefaults d = resolve_request_defaults({}, model_file());
  auto parsed = parse_generation_request(Endpoint::completions, R"({"prompt": "x", "top_k": 3})", d.sampling);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(parsed));
  const auto& r = std::get<GenerationRequest>(parsed);
  EXPECT_EQ(r.sampling.top_k, 3);                 // the request
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.6f);  // the default
  EXPECT_FALSE(r.max_tokens);                     // omitted: the service applies the default, capped
}

}  // namespace
}  // namespace tandem::server
