// Tool-call markers that are special tokens (ADR 0034): a Mistral-style
// tokenizer (tests/fixtures/mistral-style) makes [TOOL_CALLS] one special
// token, which the detokenizer skips. GenerationRun keeps the text of the ids
// it is told to keep, so the parser sees the marker — whole and streamed —
// and without that the call is lost in the content (the bug this fixes).
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "server/generation.h"

namespace tandem::server {
namespace {

using scheduler::FinishReason;
using scheduler::RequestUpdate;

constexpr int32_t kMarker = 8191;
const char* kCall = R"([TOOL_CALLS] [{"name": "get_time", "arguments": {"zone": "CET"}}])";

class ToolCallTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* root = std::getenv("TANDEM_SOURCE_DIR");
    ASSERT_NE(root, nullptr) << "TANDEM_SOURCE_DIR is set by CTest";
    auto t = tok::Tokenizer::from_file(std::string(root) + "/tests/fixtures/mistral-style/tokenizer.json");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    tokenizer_.emplace(std::move(*t));
  }

  // A chat run with tool_choice auto in `format`'s syntax; `request` is its engine request.
  std::unique_ptr<GenerationRun> chat_run(grammar::ToolCallFormat format, bool stream,
                                          std::shared_ptr<scheduler::EngineRequest>& request) {
    GenerationRequest req;
    req.endpoint = Endpoint::chat_completions;
    req.stream = stream;
    req.structured.functions.push_back({"get_time", nullptr});
    req.structured.format = format;
    request = std::make_shared<scheduler::EngineRequest>();
    GenerationRun::Choice c{request, std::nullopt, StopMatcher({}), {}, {}, {}, {}, {}, false};
    c.detok.emplace(*tokenizer_, true);
    std::vector<GenerationRun::Choice> choices;
    choices.push_back(std::move(c));
    return std::make_unique<GenerationRun>(std::move(req), "chatcmpl-1", "m", 1, &*tokenizer_,
                                           std::move(choices));
  }

  // An update carrying `text`'s ids.
  RequestUpdate tokens_of(const std::string& text) {
    RequestUpdate u;
    for (int32_t id : tokenizer_->encode(text, false)) u.tokens.push_back({id, 0.0f, {}});
    return u;
  }

  // A chat run with tool_choice auto in the Mistral syntax, fed `text`'s ids and finished.
  std::unique_ptr<GenerationRun> run_of(const std::string& text, bool keep_marker, bool stream) {
    std::shared_ptr<scheduler::EngineRequest> request;
    auto run = chat_run(grammar::ToolCallFormat::mistral, stream, request);
    if (keep_marker) run->keep_special_tokens({kMarker});
    RequestUpdate u = tokens_of(text);
    u.finish = FinishReason::stop;
    request->channel->push(std::move(u));
    return run;
  }

  std::optional<tok::Tokenizer> tokenizer_;
};

TEST_F(ToolCallTokens, TheSpecialMarkerIsOneTokenThatAPlainDecodeDrops) {
  const auto ids = tokenizer_->encode(kCall, false);
  ASSERT_EQ(ids.front(), kMarker);
  EXPECT_EQ(tokenizer_->decode(ids, true).find("[TOOL_CALLS]"), std::string::npos);
}

TEST_F(ToolCallTokens, KeptMarkerMakesTheCallAToolCall) {
  const auto [status, body] = run_of(std::string("Sure. ") + kCall, true, false)->collect();
  ASSERT_EQ(status, 200);
  const auto c = nlohmann::json::parse(body)["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls") << body;
  EXPECT_EQ(c["message"]["content"], "Sure.");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << body;
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["arguments"], R"({"zone":"CET"})");
}

TEST_F(ToolCallTokens, WithoutKeepingItTheCallStaysContent) {
  const auto [status, body] = run_of(kCall, false, false)->collect();
  ASSERT_EQ(status, 200);
  const auto c = nlohmann::json::parse(body)["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_FALSE(c["message"].contains("tool_calls"));
}

TEST_F(ToolCallTokens, StreamedTheMarkerAndCallAreHeldThenSentAsADelta) {
  std::string sse;
  ASSERT_TRUE(run_of(std::string("Sure. ") + kCall, true, true)->pump([&](const std::string& s) {
    sse += s;
    return true;
  }));
  std::string content;
  nlohmann::json calls = nlohmann::json::array();
  std::string finish;
  for (size_t at = 0; (at = sse.find("data: {", at)) != std::string::npos;) {
    const size_t end = sse.find("\n\n", at);
    const auto j = nlohmann::json::parse(sse.substr(at + 6, end - at - 6));
    at = end;
    const auto& delta = j["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls"))
      for (const auto& k : delta["tool_calls"]) calls.push_back(k);
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "Sure. ");
  ASSERT_EQ(calls.size(), 1u) << sse;
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_time");
  EXPECT_EQ(finish, "tool_calls");
}

// A stream that ends in an error (a dead end: the request's constraints left no token) while the
// text before it is held back as a possible call's start: that text goes out as content before the
// error event, which names the constraint. It used to be dropped.
TEST_F(ToolCallTokens, StreamedTextHeldBackIsSentBeforeAnErrorEvent) {
  std::shared_ptr<scheduler::EngineRequest> request;
  auto run = chat_run(grammar::ToolCallFormat::hermes, true, request);
  // "<tool_" may open a call: held back, while "Sure. " goes out.
  request->channel->push(tokens_of("Sure. <tool_"));

  std::vector<nlohmann::json> events;
  ASSERT_TRUE(run->pump([&](const std::string& s) {
    if (s.rfind("data: {", 0) != 0) return true;
    events.push_back(nlohmann::json::parse(s.substr(6)));
    // Once "Sure. " is out, the engine finds the dead end (an update with no token).
    const auto& j = events.back();
    if (j.contains("choices") && j["choices"][0]["delta"].value("content", "") == "Sure. ") {
      RequestUpdate dead_end;
      dead_end.finish = FinishReason::error;
      dead_end.error =
          invalid_argument("no token is allowed after 4 generated tokens: logit_bias bans every token");
      request->channel->push(std::move(dead_end));
    }
    return true;
  }));
  std::vector<std::string> contents;
  for (const auto& j : events)
    if (j.contains("choices") && j["choices"][0]["delta"].contains("content"))
      contents.push_back(j["choices"][0]["delta"]["content"]);
  EXPECT_EQ(contents, (std::vector<std::string>{"", "Sure. ", "<tool_"}));
  ASSERT_FALSE(events.empty());
  const nlohmann::json& error = events.back()["error"];
  EXPECT_EQ(error["code"], "no_allowed_token") << events.back();
  EXPECT_EQ(error["param"], "logit_bias") << events.back();
}

}  // namespace
}  // namespace tandem::server
