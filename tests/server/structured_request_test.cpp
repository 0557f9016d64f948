// response_format / json_schema / grammar / tools / tool_choice parsing: what
// is accepted, and every rejection a 400 naming the field.
#include <gtest/gtest.h>

#include "grammar/automaton.h"
#include "server/openai_request.h"
#include "server/tool_call_reply.h"

namespace tandem::server {
namespace {

const char* kMessages = R"("messages": [{"role": "user", "content": "hi"}])";

std::variant<GenerationRequest, ApiError> chat(const std::string& rest) {
  return parse_generation_request(Endpoint::chat_completions,
                                  std::string("{") + kMessages + ", " + rest + "}");
}

ApiError error_of(const std::variant<GenerationRequest, ApiError>& r) {
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << "expected a 400";
    return {};
  }
  return std::get<ApiError>(r);
}

StructuredRequest ok_of(const std::variant<GenerationRequest, ApiError>& r) {
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<GenerationRequest>(r).structured;
}

bool accepts(const StructuredRequest& s, const std::string& text) {
  grammar::ByteAutomaton a(s.grammar);
  return a.accepting(a.advance(a.start(), text));
}

TEST(StructuredRequest, ResponseFormats) {
  EXPECT_EQ(ok_of(chat(R"("response_format": {"type": "text"})")).grammar, nullptr);
  auto obj = ok_of(chat(R"("response_format": {"type": "json_object"})"));
  ASSERT_NE(obj.grammar, nullptr);
  EXPECT_TRUE(accepts(obj, R"({"a": 1})"));
  EXPECT_FALSE(accepts(obj, "[1]"));
  // Properties come out in the schema's order, not sorted.
  auto js = ok_of(chat(
      R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true, "schema": {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "boolean"}}, "required": ["z", "a"], "additionalProperties": false}}})"));
  ASSERT_NE(js.grammar, nullptr);
  EXPECT_TRUE(accepts(js, R"({"z":1,"a":true})"));
  EXPECT_FALSE(accepts(js, R"({"a":true,"z":1})"));
  // llama-server's fields, on completions too.
  auto ls = std::get<GenerationRequest>(parse_generation_request(
      Endpoint::completions, R"({"prompt": "x", "json_schema": {"type": "integer"}})"));
  EXPECT_TRUE(accepts(ls.structured, "42"));
  auto gb = std::get<GenerationRequest>(parse_generation_request(
      Endpoint::completions, R"({"prompt": "x", "grammar": "root ::= \"yes\" | \"no\""})"));
  EXPECT_TRUE(accepts(gb.structured, "no"));
  EXPECT_FALSE(accepts(gb.structured, "maybe"));
}

TEST(StructuredRequest, RejectionsNameTheField) {
  struct Case {
    std::string body, param, needle;
  };
  const std::vector<Case> cases = {
      {R"("response_format": {"type": "bogus_format"})", "response_format.type", "bogus_format"},
      {R"("response_format": "json")", "response_format", "object"},
      {R"("response_format": {"type": "json_schema"})", "response_format.json_schema", "schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "array", "uniqueItems": true}}})",
       "response_format.json_schema.schema", "'uniqueItems'"},
      {R"("grammar": "root ::= (")", "grammar", "line 1"},
      {R"("grammar": "root ::= \"a\"", "json_schema": {"type": "string"})", "grammar", "both"},
      {R"("tools": {"type": "function"})", "tools", "array"},
      {R"("tools": [{"type": "function", "function": {}}])", "tools[0].function.name", "name"},
      {R"("tools": [{"type": "retrieval"}])", "tools[0].type", "function"},
      {R"("tool_choice": "sometimes", "tools": [{"type": "function", "function": {"name": "f"}}])",
       "tool_choice", "sometimes"},
      {R"("tool_choice": "required")", "tool_choice", "empty"},
      {R"("tool_choice": {"type": "function", "function": {"name": "g"}}, "tools": [{"type": "function", "function": {"name": "f"}}])",
       "tool_choice", "'g'"},
      {R"("tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "format": "ipv6"}}}}}])",
       "tools[0].function.parameters", "ipv6"},
      {R"("tool_choice": "required", "response_format": {"type": "json_object"}, "tools": [{"type": "function", "function": {"name": "f"}}])",
       "tool_choice", "response_format"},
      {R"("parallel_tool_calls": "yes")", "parallel_tool_calls", "boolean"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    ApiError e = error_of(chat(c.body));
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.param.value_or(""), c.param);
    EXPECT_NE(e.message.find(c.needle), std::string::npos) << e.message;
  }
  ApiError e = error_of(parse_generation_request(
      Endpoint::completions,
      R"({"prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}]})"));
  EXPECT_EQ(e.param.value_or(""), "tools");
}

TEST(StructuredRequest, AutoToolsAreNotCompiledButRequiredOnesAre) {
  // An unsupported keyword in a tool the model merely may call is no error (nothing is constrained)...
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": true}}}}}, {"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}}}])";
  auto s = ok_of(chat(tools));
  EXPECT_TRUE(s.parses_tool_calls());
  EXPECT_EQ(s.grammar, nullptr);
  ASSERT_FALSE(finish_tool_grammar(grammar::ToolCallFormat::hermes, s).has_value());
  EXPECT_EQ(s.grammar, nullptr);  // f's schema does not compile: auto stays unconstrained
  // With schemas that compile, auto gets the lazy grammar: free text, or valid calls.
  auto lazy = ok_of(chat(
      R"("tools": [{"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}}}])"));
  ASSERT_FALSE(finish_tool_grammar(grammar::ToolCallFormat::hermes, lazy).has_value());
  ASSERT_NE(lazy.grammar, nullptr);
  EXPECT_TRUE(accepts(lazy, "No call needed."));
  EXPECT_TRUE(accepts(lazy, "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"n\":3}}\n</tool_call>"));
  EXPECT_FALSE(accepts(lazy, "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"));
  // Mistral's syntax gets the lazy form too (its marker, a special token, is in the tool-call trie);
  // Llama 3's does not (the call is the whole message, with no marker to wait for).
  auto mistral = ok_of(chat(R"("tools": [{"type": "function", "function": {"name": "g"}}])"));
  ASSERT_FALSE(finish_tool_grammar(grammar::ToolCallFormat::mistral, mistral).has_value());
  ASSERT_NE(mistral.grammar, nullptr);
  EXPECT_TRUE(accepts(mistral, "No call needed."));
  EXPECT_TRUE(accepts(mistral, R"([TOOL_CALLS] [{"name": "g", "arguments": {"n": 3}}])"));
  EXPECT_FALSE(accepts(mistral, R"([TOOL_CALLS] [{"name": "f", "arguments": {}}])"));
  auto llama = ok_of(chat(R"("tools": [{"type": "function", "function": {"name": "g"}}])"));
  ASSERT_FALSE(finish_tool_grammar(grammar::ToolCallFormat::llama3, llama).has_value());
  EXPECT_EQ(llama.grammar, nullptr);
  // ... naming the other function builds a grammar for it alone.
  auto named = ok_of(chat(
      tools +
      R"(, "tool_choice": {"type": "function", "function": {"name": "g"}}, "parallel_tool_calls": false)"));
  ASSERT_FALSE(finish_tool_grammar(grammar::ToolCallFormat::hermes, named).has_value());
  EXPECT_TRUE(accepts(named, "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"n\":3}}\n</tool_call>"));
  EXPECT_FALSE(accepts(named, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(ok_of(chat(tools + R"(, "tool_choice": "none")")).parses_tool_calls());
}

TEST(StructuredRequest, ToolCallReplyShapes) {
  StructuredRequest s;
  s.functions.push_back({"f", nullptr});
  s.parallel_tool_calls = false;
  const std::string two =
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"f\", "
      "\"arguments\": {}}\n</tool_call>";
  ToolCallReply r = tool_call_reply(two, s, "x");
  ASSERT_TRUE(r.has_calls);
  ASSERT_EQ(r.calls.size(), 1u);  // parallel_tool_calls false: the first only
  EXPECT_EQ(r.message["content"], nullptr);
  EXPECT_EQ(r.calls[0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(r.calls[0]["id"], "call_x_0");
  auto plain = tool_call_reply("just text", s, "x");
  EXPECT_FALSE(plain.has_calls);
  EXPECT_EQ(plain.message["content"], "just text");
  EXPECT_FALSE(plain.message.contains("tool_calls"));
}

TEST(StructuredRequest, ToolCallArgumentsBecomeObjectsForTheTemplate) {
  auto m = nlohmann::ordered_json::parse(
      R"([{"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": 2}"}}, {"function": {"name": "g", "arguments": "not json"}}]}])");
  prepare_messages_for_template(m);
  EXPECT_EQ(m[0]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":1,"a":2})");
  EXPECT_EQ(m[0]["tool_calls"][1]["function"]["arguments"], "not json");
}

// Arguments nested a million deep would be copied and rendered recursively (a stack overflow on
// the HTTP worker): past the request depth limit they reach the template as the string sent.
TEST(StructuredRequest, ToolCallArgumentsNestedTooDeepStayAString) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  nlohmann::ordered_json m = nlohmann::ordered_json::array(
      {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", deep}}}}}}}});
  prepare_messages_for_template(m);
  EXPECT_EQ(m[0]["tool_calls"][0]["function"]["arguments"], deep);
}

}  // namespace
}  // namespace tandem::server
