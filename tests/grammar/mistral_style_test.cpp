// Tool calls whose marker is a special token, on a Mistral-style tokenizer and
// template (tests/fixtures/mistral-style, written by make_mistral_style.py):
// the template renders tool conversations as transformers' apply_chat_template
// does, the marker is one token that a plain decode skips, the tool-call trie
// holds it by its text, and the lazy auto grammar lets a call open with it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "grammar/json_schema.h"
#include "grammar/token_constraint.h"
#include "grammar/tool_calls.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::grammar {
namespace {

constexpr int32_t kMarker = 8191;

std::string source_dir() {
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  return src ? src : ".";
}

nlohmann::ordered_json golden() {
  std::ifstream in(source_dir() + "/tests/grammar/golden/mistral_style_renders.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::ordered_json::parse(ss.str());
}

const tok::Tokenizer& tokenizer() {
  static const tok::Tokenizer t = [] {
    auto r = tok::Tokenizer::from_file(source_dir() + "/tests/fixtures/mistral-style/tokenizer.json");
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(*r);
  }();
  return t;
}

std::vector<int32_t> ids_of(const nlohmann::ordered_json& j) { return j.get<std::vector<int32_t>>(); }

TEST(MistralStyle, TemplateRendersToolConversationsLikeTransformers) {
  auto tpl = tok::ChatTemplate::from_tokenizer_config(source_dir() +
                                                      "/tests/fixtures/mistral-style/tokenizer_config.json");
  ASSERT_TRUE(tpl.ok()) << tpl.status().to_string();
  EXPECT_EQ(detect_tool_call_format(tpl->source()), ToolCallFormat::mistral);
  const auto g = golden();
  ASSERT_EQ(g["renders"].size(), 3u);
  for (const auto& c : g["renders"]) {
    tok::ChatRenderInput input;
    input.messages = c["messages"];
    if (c.contains("tools")) input.tools = c["tools"];
    input.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    auto r = tpl->render(input);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(*r, c["render"].get<std::string>()) << c["messages"].dump();
  }
}

TEST(MistralStyle, MarkerIsOneSpecialTokenThatAPlainDecodeSkips) {
  const auto g = golden();
  const auto ids = tokenizer().encode(g["call_text"].get<std::string>(), false);
  EXPECT_EQ(ids, ids_of(g["call_ids"]));
  ASSERT_EQ(ids.front(), kMarker);
  EXPECT_TRUE(tokenizer().is_special(kMarker));
  EXPECT_EQ(tokenizer().decode(ids, false), g["call_decoded_keeping_specials"].get<std::string>());
  EXPECT_EQ(tokenizer().decode(ids, true), g["call_decoded_skipping_specials"].get<std::string>());
  EXPECT_EQ(tool_call_markers(ToolCallFormat::mistral), std::vector<std::string>{"[TOOL_CALLS]"});
}

TEST(MistralStyle, ToolCallTrieHoldsTheMarkerByItsText) {
  const TokenTrie plain = TokenTrie::from_tokenizer(tokenizer());
  const TokenTrie kept = TokenTrie::from_tokenizer(tokenizer(), {kMarker});
  EXPECT_EQ(plain.bytes(kMarker), "");
  EXPECT_EQ(kept.bytes(kMarker), "[TOOL_CALLS]");
  EXPECT_GT(kept.node_count(), plain.node_count());
}

bool allowed(GrammarConstraint& c, std::span<const int32_t> prefix, int32_t id) {
  const auto& bits = c.allowed(prefix);
  return (bits[id / 64] >> (id % 64)) & 1;
}

TEST(MistralStyle, AutoCallMayOpenWithTheSpecialMarker) {
  FunctionSpec clock{"get_time", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {}})")};
  auto text = tool_call_gbnf(ToolCallFormat::mistral, {clock}, true, true);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto g = testing::compile(*text);
  ASSERT_NE(g, nullptr) << *text;
  EXPECT_EQ(testing::verdict(g, "Plain text, [brackets] and [TOOL_CALL"), 'a');
  EXPECT_EQ(testing::verdict(g, R"(Let me see. [TOOL_CALLS][{"name": "get_time", "arguments": {}}])"), 'a');
  EXPECT_EQ(testing::verdict(g, R"([TOOL_CALLS] [{"name": "get_time", "arguments": {}}])"), 'a');
  EXPECT_EQ(testing::verdict(g, R"([TOOL_CALLS] [{"name": "nope")"), 'x');
  EXPECT_EQ(testing::verdict(g, R"([TOOL_CALLS] [{"name": "get_time", "arguments": {}}] and then)"), 'x');

  const int32_t eos = 0;
  const auto call = ids_of(golden()["call_ids"]);
  auto kept = std::make_shared<const TokenTrie>(TokenTrie::from_tokenizer(tokenizer(), {kMarker}));
  GrammarConstraint c(g, kept, {eos});
  EXPECT_TRUE(allowed(c, {}, kMarker));
  EXPECT_FALSE(allowed(c, std::span<const int32_t>(call.data(), 1), kMarker));  // no second marker
  EXPECT_TRUE(c.accepts(call));
  const auto parsed = parse_tool_calls(ToolCallFormat::mistral, tokenizer().decode(call, false));
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "get_time");
  EXPECT_EQ(parsed.calls[0].arguments, "{}");
  // Without the kept marker (the plain trie) the call can only be spelled out.
  GrammarConstraint spelled(g, std::make_shared<const TokenTrie>(TokenTrie::from_tokenizer(tokenizer())),
                            {eos});
  EXPECT_FALSE(allowed(spelled, {}, kMarker));
}

}  // namespace
}  // namespace tandem::grammar
