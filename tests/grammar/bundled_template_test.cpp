// The bundled models' chat template with tools, assistant tool calls (content
// null) and tool results renders byte for byte what Python Jinja2 renders
// with transformers' settings (golden/bundled_template_renders.json, written
// by make_template_goldens.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tokenizer/chat_template.h"

namespace tandem::grammar {
namespace {

std::string source_dir() {
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  return src ? src : ".";
}

TEST(BundledTemplate, RendersToolConversationsLikeJinja2) {
  auto tpl =
      tok::ChatTemplate::from_tokenizer_config(source_dir() + "/models/tandem-target/tokenizer_config.json");
  ASSERT_TRUE(tpl.ok()) << tpl.status().to_string();
  std::ifstream in(source_dir() + "/tests/grammar/golden/bundled_template_renders.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto cases = nlohmann::ordered_json::parse(ss.str());
  ASSERT_EQ(cases.size(), 10u);
  for (const auto& c : cases) {
    tok::ChatRenderInput input;
    input.messages = c["messages"];
    if (c.contains("tools")) input.tools = c["tools"];
    input.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    auto r = tpl->render(input);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(*r, c["render"].get<std::string>()) << c["messages"].dump();
  }
}

}  // namespace
}  // namespace tandem::grammar
