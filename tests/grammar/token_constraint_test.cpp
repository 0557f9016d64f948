// The token mask: hand-checked allowed sets on a small vocabulary, the end
// tokens only where the grammar accepts, prefix caching that never changes a
// mask, and the sampler applying it on greedy and seeded picks.
#include "grammar/token_constraint.h"

#include <gtest/gtest.h>

#include <cmath>

#include "grammar/tool_calls.h"
#include "sampling/sampler.h"
#include "test_util.h"

namespace tandem::grammar {
namespace {

// id:               0        1    2    3     4    5       6     7    8    9      10   11
const std::vector<std::string> kVocab = {"", "{", "}", "\"", "a", "ab", "\"a", ":", "1", "{\"", " ", "\"}"};
constexpr int32_t kEos = 0;  // no bytes: an end token

std::vector<int32_t> allowed_ids(GrammarConstraint& c, std::vector<int32_t> prefix) {
  const auto& bits = c.allowed(prefix);
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < static_cast<int32_t>(kVocab.size()); ++i)
    if ((bits[i / 64] >> (i % 64)) & 1) ids.push_back(i);
  return ids;
}

std::shared_ptr<GrammarConstraint> make(const std::string& gbnf) {
  return std::make_shared<GrammarConstraint>(
      testing::compile(gbnf), std::make_shared<const TokenTrie>(kVocab), std::vector<int32_t>{kEos});
}

const char* kObject = R"(root ::= "{" ( "\"" [a-b]* "\"" ":" "1" )? "}")";

TEST(TokenConstraint, AllowsExactlyTheViableTokens) {
  auto c = make(kObject);
  EXPECT_EQ(allowed_ids(*c, {}), (std::vector<int32_t>{1, 9}));      // "{" and "{\""
  EXPECT_EQ(allowed_ids(*c, {1}), (std::vector<int32_t>{2, 3, 6}));  // "}" "\"" "\"a"
  EXPECT_EQ(allowed_ids(*c, {9}), (std::vector<int32_t>{3, 4, 5}));  // inside the key
  EXPECT_EQ(allowed_ids(*c, {9, 5}), (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(allowed_ids(*c, {9, 3}), (std::vector<int32_t>{7}));
  EXPECT_EQ(allowed_ids(*c, {9, 3, 7, 8}), (std::vector<int32_t>{2}));
  EXPECT_EQ(allowed_ids(*c, {9, 3, 7, 8, 2}), (std::vector<int32_t>{kEos}));  // complete: only the end
  EXPECT_TRUE(c->accepts(std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(c->accepts(std::vector<int32_t>{1}));
}

TEST(TokenConstraint, MaskIsAFunctionOfThePrefixOnly) {
  // One constraint asked along diverging prefixes (as verify rows, drafts and
  // rollbacks do) gives the masks a fresh constraint gives for each prefix.
  const std::vector<std::vector<int32_t>> prefixes = {{},           {9, 4}, {9},       {1},
                                                      {9, 4, 4, 3}, {9, 4}, {9, 3, 7}, {}};
  auto shared = make(kObject);
  for (const auto& p : prefixes) {
    auto fresh = make(kObject);
    EXPECT_EQ(allowed_ids(*shared, p), allowed_ids(*fresh, p));
  }
}

TEST(TokenConstraint, DeadPrefixAllowsOnlyTheEnd) {
  auto c = make(kObject);
  EXPECT_EQ(allowed_ids(*c, {2}), (std::vector<int32_t>{kEos}));
}

TEST(TokenConstraint, SamplerPicksOnlyAllowedTokens) {
  sampling::Sampler sampler;
  std::vector<float> logits(kVocab.size(), 0.0f);
  logits[10] = 50.0f;  // the model "wants" a space, which the grammar forbids
  logits[2] = 1.0f;
  for (float temperature : {0.0f, 0.7f, 1.5f}) {
    for (uint64_t seed : {1u, 2u, 3u, 4u}) {
      sampling::SamplingParams p;
      p.temperature = temperature;
      p.seed = seed;
      p.constraint = make(kObject);
      const std::vector<int32_t> generated = {1};
      const int32_t t = sampler.pick(logits, p, {{}, generated}, 5);
      EXPECT_TRUE(t == 2 || t == 3 || t == 6) << t;
      if (temperature == 0.0f) {
        EXPECT_EQ(t, 2);
      }
    }
  }
}

TEST(ToolCalls, HermesGrammarAndParserAgree) {
  FunctionSpec f{
      "get_weather",
      nlohmann::ordered_json::parse(
          R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false})")};
  auto text = tool_call_gbnf(ToolCallFormat::hermes, {f}, true);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto g = testing::compile(*text);
  ASSERT_NE(g, nullptr);
  const std::string one =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>";
  EXPECT_EQ(testing::verdict(g, one), 'a');
  EXPECT_EQ(testing::verdict(g, one + "\n" + one), 'a');
  EXPECT_EQ(testing::verdict(g, "<tool_call>\n{\"name\": \"other\""), 'x');
  EXPECT_EQ(testing::verdict(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}"), 'x');
  auto parsed = parse_tool_calls(ToolCallFormat::hermes, "Let me check.\n" + one);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(parsed.content, "Let me check.");
  auto broken = parse_tool_calls(ToolCallFormat::hermes, "<tool_call>\n{\"name\": oops}\n</tool_call>");
  EXPECT_TRUE(broken.calls.empty());
  EXPECT_EQ(broken.content, "<tool_call>\n{\"name\": oops}\n</tool_call>");
}

TEST(ToolCalls, AutoAllowsFreeTextThenOnlyValidCalls) {
  FunctionSpec f{
      "get_weather",
      nlohmann::ordered_json::parse(
          R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false})")};
  auto text = tool_call_gbnf(ToolCallFormat::hermes, {f}, false, true);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto g = testing::compile(*text);
  ASSERT_NE(g, nullptr) << *text;
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>";
  EXPECT_EQ(testing::verdict(g, ""), 'a');
  EXPECT_EQ(testing::verdict(g, "Sure. a < b, <tool_cal> and <<tool_call"), 'a');  // near misses are text
  EXPECT_EQ(testing::verdict(g, "Let me check.\n" + call), 'a');
  EXPECT_EQ(testing::verdict(g, call), 'a');
  EXPECT_EQ(testing::verdict(g, "x <tool_call>\n{\"name\": \"other\""), 'x');  // an opened call must be valid
  EXPECT_EQ(testing::verdict(g, "the <tool_call> tag"), 'x');
  EXPECT_EQ(testing::verdict(g, call + "\n" + call), 'x');  // parallel_tool_calls false: one call
  EXPECT_EQ(testing::verdict(g, call + " and more"), 'x');
  EXPECT_FALSE(tool_call_gbnf(ToolCallFormat::llama3, {f}, true, true).ok());  // the call is the message
}

TEST(ToolCalls, Llama3AndMistralParse) {
  auto l = parse_tool_calls(ToolCallFormat::llama3,
                            R"({"name": "f", "parameters": {"x": 1}}; {"name": "g", "parameters": {}})");
  ASSERT_EQ(l.calls.size(), 2u);
  EXPECT_EQ(l.calls[1].name, "g");
  EXPECT_EQ(l.calls[0].arguments, R"({"x":1})");
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::llama3, "Hello {there}").calls.empty());
  auto m =
      parse_tool_calls(ToolCallFormat::mistral, R"([TOOL_CALLS][{"name": "f", "arguments": {"a": "b"}}])");
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].arguments, R"({"a":"b"})");
  EXPECT_EQ(detect_tool_call_format("{{ '[TOOL_CALLS]' }}"), ToolCallFormat::mistral);
  EXPECT_EQ(detect_tool_call_format("<|python_tag|>"), ToolCallFormat::llama3);
  EXPECT_EQ(detect_tool_call_format("<tool_call>"), ToolCallFormat::hermes);
}

TEST(ToolCalls, SafePrefixHoldsBackAPossibleMarker) {
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::hermes, "Hello <tool"), 6u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::hermes, "Hello <tool_call>{"), 6u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::hermes, "Hello"), 5u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::hermes, "a < b"), 5u);
}

}  // namespace
}  // namespace tandem::grammar
