// Fuzz target: a chat template (Jinja source) -> ChatTemplate::parse, then
// render with a small fixed conversation (with and without tools and the
// generation prompt). Errors are fine; crashes, hangs and runaway memory are not.
#include <cstdint>
#include <ctime>
#include <string>

#include "tokenizer/chat_template.h"

namespace {

tandem::tok::ChatRenderInput make_input(bool tools, bool generation_prompt) {
  using nlohmann::ordered_json;
  tandem::tok::ChatRenderInput in;
  in.messages = ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2? \u00e9\u4e2d"},
    {"role": "assistant", "content": "4", "tool_calls": [{"type": "function",
      "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
    {"role": "tool", "content": "4", "tool_call_id": "c1"},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
  ])");
  if (tools)
    in.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "add",
      "description": "adds", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])");
  in.add_generation_prompt = generation_prompt;
  in.extra = {{"enable_thinking", false}};
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 6;
  now.tm_mday = 26;
  in.now = now;
  return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tandem::tok::ChatRenderInput plain = make_input(false, false);
  static const tandem::tok::ChatRenderInput with_tools = make_input(true, true);
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto tpl = tandem::tok::ChatTemplate::parse(source, "<s>", "</s>");
  if (!tpl.ok()) return 0;
  (void)tpl->render(plain);
  (void)tpl->render(with_tools);
  return 0;
}
