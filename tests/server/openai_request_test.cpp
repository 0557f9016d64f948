#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <limits>

#include "server/request_fields.h"

namespace tandem::server {
namespace {

GenerationRequest parse_ok(Endpoint e, const std::string& body) {
  auto r = parse_generation_request(e, body);
  if (auto* err = std::get_if<ApiError>(&r)) ADD_FAILURE() << err->message;
  return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r) : GenerationRequest{};
}

ApiError parse_err(Endpoint e, const std::string& body) {
  auto r = parse_generation_request(e, body);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << "expected an error for " << body;
    return {};
  }
  return std::get<ApiError>(r);
}

// Found by tests/fuzz/fuzz_openai_request: a number beyond double's range makes
// nlohmann::json throw out_of_range (not parse_error), which used to escape the
// parser and terminate the process.
TEST(OpenAIRequest, NumberOverflowingADoubleIsInvalidJson) {
  for (Endpoint e : {Endpoint::completions, Endpoint::chat_completions}) {
    for (const char* body : {R"({"prompt": [1, 2, 31e308], "max_tokens": 4})", R"({"temperature": -1e400})",
                             R"({"messages": [{"role": "user", "content": "hi"}], "top_p": 9e99999})"}) {
      ApiError err = parse_err(e, body);
      EXPECT_EQ(err.http_status, 400);
      EXPECT_EQ(err.param, "body");
      EXPECT_EQ(err.code, "invalid_json");
      EXPECT_NE(err.message.find("number overflow"), std::string::npos) << err.message;
    }
  }
}

// Arrays or objects nested a million deep (2 MB, well inside the body limit) parse, but
// nlohmann::json's copy and dump recurse once per level: the copy of "messages" (or a dump of
// the body) overflowed the HTTP worker's stack and the server died of SIGSEGV. Nesting past
// kMaxJsonDepth is now refused before parsing; nesting at the limit still parses.
TEST(OpenAIRequest, NestingPastTheDepthLimitIsInvalidJson) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  // The body, "messages" and its message are 3 levels; {"junk": ...} is 1.
  auto bodies = [&](int depth) {
    return std::vector<std::string>{
        R"({"messages": [{"role": "user", "content": "hi", "extra": )" + nested(depth - 3) + "}]}",
        R"({"prompt": "x", "junk": )" + nested(depth - 1) + "}"};
  };
  for (Endpoint e : {Endpoint::completions, Endpoint::chat_completions}) {
    for (const std::string& body : bodies(1000000)) {
      ApiError err = parse_err(e, body);
      EXPECT_EQ(err.http_status, 400);
      EXPECT_EQ(err.param, "body");
      EXPECT_EQ(err.code, "invalid_json");
      EXPECT_NE(err.message.find("128 levels"), std::string::npos) << err.message;
    }
    for (const std::string& body : bodies(fields::kMaxJsonDepth)) {
      auto parsed = parse_generation_request(e, body, {});
      if (const ApiError* err = std::get_if<ApiError>(&parsed)) {
        EXPECT_NE(err->code, "invalid_json") << "nesting at the limit is accepted: " << err->message;
      }
    }
    EXPECT_EQ(parse_err(e, bodies(fields::kMaxJsonDepth + 1)[1]).code, "invalid_json");
  }
  // Brackets inside strings are text, not nesting (escaped quotes do not end the string).
  EXPECT_FALSE(fields::nested_deeper_than(R"({"a": ")" + std::string(1000, '[') + R"("["})", 2));
  EXPECT_TRUE(fields::nested_deeper_than(R"({"a": [[1]]})", 2));
  EXPECT_FALSE(fields::nested_deeper_than(R"({"a": [1, [2]]})", 3));
}

// An integral float of 2^63 (9223372036854775808.0) is outside int64_t, whose largest value is
// 2^63 - 1; it used to pass the range check (INT64_MAX rounds up to 2^63 as a double) and be
// converted to int64_t, which is undefined behaviour. -2^63 is int64_t's smallest value.
TEST(OpenAIRequest, SeedAsAFloatOutsideInt64IsRejected) {
  for (const char* seed : {"9223372036854775808.0", "9.3e18", "-9.3e18", "1e19"}) {
    ApiError err = parse_err(Endpoint::completions, std::string(R"({"prompt": "x", "seed": )") + seed + "}");
    EXPECT_EQ(err.http_status, 400) << seed;
    EXPECT_EQ(err.param, "seed") << seed;
  }
  EXPECT_EQ(parse_ok(Endpoint::completions, R"({"prompt": "x", "seed": -9223372036854775808.0})").seed,
            static_cast<uint64_t>(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(parse_ok(Endpoint::completions, R"({"prompt": "x", "seed": 4096.0})").seed, 4096u);
}

TEST(OpenAIRequest, ChatWithEveryField) {
  auto r = parse_ok(Endpoint::chat_completions, R"({
    "model": "tandem", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    "max_completion_tokens": 12, "temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1, "logit_bias": {"42": -100},
    "logprobs": true, "top_logprobs": 3, "n": 2, "stream": true, "stream_options": {"include_usage": true},
    "stop": ["\n\n", "END"]})");
  EXPECT_EQ(r.model, "tandem");
  EXPECT_EQ(r.structured.messages.size(), 2u);  // key order kept; r.messages is not filled (one tree less)
  EXPECT_TRUE(r.messages.is_null());
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.8f);
  EXPECT_EQ(r.sampling.top_k, 40);
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, 7u);
  ASSERT_EQ(r.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.sampling.logit_bias[0].first, 42);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
}

TEST(OpenAIRequest, CompletionPromptForms) {
  EXPECT_EQ(parse_ok(Endpoint::completions, R"({"prompt": "Once"})").prompt_text, "Once");
  EXPECT_EQ(parse_ok(Endpoint::completions, R"({"prompt": ["Once"]})").prompt_text, "Once");
  EXPECT_EQ(parse_ok(Endpoint::completions, R"({"prompt": [1, 2, 3]})").prompt_tokens,
            (std::vector<int32_t>{1, 2, 3}));
  auto r = parse_ok(Endpoint::completions, R"({"prompt": "x", "logprobs": 2, "echo": true, "stop": "."})");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"."}));
}

TEST(OpenAIRequest, AnOmittedSeedIsEmpty) {
  auto r = parse_ok(Endpoint::completions, R"({"prompt": "x"})");
  EXPECT_FALSE(r.seed.has_value());
  r = parse_ok(Endpoint::completions, R"({"prompt": "x", "seed": -1})");
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, static_cast<uint64_t>(-1));
}

// A 64-bit seed arrives exactly (a double would round it past 2^53).
TEST(OpenAIRequest, LargeSeedsAreExact) {
  auto r = parse_ok(Endpoint::completions, R"({"prompt": "x", "seed": 1152921504606846977})");  // 2^60 + 1
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, 1152921504606846977u);
  r = parse_ok(Endpoint::completions, R"({"prompt": "x", "seed": -9007199254740993})");  // -(2^53 + 1)
  EXPECT_EQ(*r.seed, static_cast<uint64_t>(int64_t{-9007199254740993}));
  EXPECT_EQ(parse_err(Endpoint::completions, R"({"prompt": "x", "seed": 18446744073709551615})").param,
            "seed");
}

// The ranges are sampling's: the parser reports sampling's field and message.
TEST(OpenAIRequest, RangeErrorsAreSamplingsOwn) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt": "x", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "x", "temperature": 1e300})", "temperature"},
      {R"({"prompt": "x", "top_k": -2})", "top_k"},
      {R"({"prompt": "x", "min_p": -0.1})", "min_p"},
      {R"({"prompt": "x", "repetition_penalty": -1})", "repetition_penalty"},
      {R"({"prompt": "x", "presence_penalty": 2.5})", "presence_penalty"},
      {R"({"prompt": "x", "frequency_penalty": -1e300})", "frequency_penalty"},
      {R"({"prompt": "x", "logit_bias": {"5": -101}})", "logit_bias"},
  };
  for (const auto& c : cases) {
    ApiError e = parse_err(Endpoint::completions, c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param.value_or(""), c.param) << c.body;
    EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
  }
  // top_k -1 still means disabled.
  EXPECT_EQ(parse_ok(Endpoint::completions, R"({"prompt": "x", "top_k": -1})").sampling.top_k, 0);
}

TEST(OpenAIRequest, ErrorsNameTheField) {
  struct Case {
    Endpoint e;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {Endpoint::chat_completions, "{not json", "body"},
      {Endpoint::chat_completions, "[1]", "body"},
      {Endpoint::chat_completions, R"({})", "messages"},
      {Endpoint::chat_completions, R"({"messages": []})", "messages"},
      {Endpoint::chat_completions, R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {Endpoint::chat_completions, R"({"messages": [{"role": "user", "content": 5}]})",
       "messages[0].content"},
      {Endpoint::chat_completions,
       R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "temperature"},
      {Endpoint::chat_completions, R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})",
       "temperature"},
      {Endpoint::chat_completions, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       "top_logprobs"},
      {Endpoint::completions, R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {Endpoint::completions, R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {Endpoint::completions, R"({"prompt": "x", "n": 17})", "n"},
      {Endpoint::completions, R"({"prompt": "x", "top_p": 0})", "top_p"},
      {Endpoint::completions, R"({"prompt": "x", "stop": [1]})", "stop"},
      {Endpoint::completions, R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias"},
      {Endpoint::completions, R"({"prompt": "x", "logit_bias": {"5": 101}})", "logit_bias"},
      {Endpoint::completions, R"({"prompt": "x", "stream": "yes"})", "stream"},
      {Endpoint::completions, R"({"prompt": "x", "logprobs": 6})", "logprobs"},
      {Endpoint::completions, R"({"prompt": {}})", "prompt"},
      {Endpoint::completions, R"({"prompt": [-1]})", "prompt"},
      {Endpoint::completions, R"({"model": 3, "prompt": "x"})", "model"},
  };
  for (const auto& c : cases) {
    ApiError e = parse_err(c.e, c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param.value_or(""), c.param) << c.body << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

}  // namespace
}  // namespace tandem::server
