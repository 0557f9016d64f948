// Structured outputs and tools in a request: response_format (text,
// json_object, json_schema), llama-server's `json_schema` and `grammar`
// fields, and tools / tool_choice / parallel_tool_calls. Parsing validates
// shapes and compiles every grammar the request constrains with, so any
// problem is a 400 naming the field (an unsupported JSON Schema keyword names
// the keyword). Which grammar a required or named tool_choice needs depends on
// the model's tool-call syntax, so that one is built by finish_tool_grammar()
// once the chat template is known. Pure functions; thread-safe.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/tool_calls.h"
#include "server/api_error.h"

namespace tandem::server {

enum class ToolChoice { none, auto_, required, function };

struct StructuredRequest {
  // The grammar the output must follow; null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  // "response_format", "json_schema", "grammar", "format", "tools", "tool_choice", or "server" (the
  // server's --grammar / --json-schema, apply_server_grammar).
  std::string grammar_source;
  // `"grammar": ""` was sent: no grammar, not even the server's (llama-server's reading of it).
  bool grammar_declined = false;
  // Tools (chat only).
  std::vector<grammar::FunctionSpec> functions;
  ToolChoice tool_choice = ToolChoice::auto_;
  std::string named_function;  // tool_choice {"type":"function","function":{"name":...}}
  bool parallel_tool_calls = true;
  grammar::ToolCallFormat format = grammar::ToolCallFormat::hermes;
  // Chat: `messages` and `tools` as sent, key order kept, for the template.
  nlohmann::ordered_json messages, tools;

  // Whether the output is scanned for tool calls.
  bool parses_tool_calls() const { return !functions.empty() && tool_choice != ToolChoice::none; }
};

// Reads the fields above from `body` (parsed with key order kept: properties
// are generated in the schema's order). `chat`: tools are accepted, and the
// messages are moved out of `body` (taken by value: a large body is not copied).
std::optional<ApiError> parse_structured(nlohmann::ordered_json body, bool chat, StructuredRequest& out);

// Ollama's `format` (/api/generate, /api/chat): "json" constrains the output
// to a JSON object (as response_format json_object), an object is a JSON
// Schema (as json_schema); "" or null: unconstrained. Errors name "format".
std::optional<ApiError> parse_ollama_format(const nlohmann::ordered_json& format, StructuredRequest& out);

// Sets out.format and, for tool_choice required / named, builds the grammar
// of a valid call in that syntax. For auto (Hermes or Mistral syntax, no
// other grammar) it builds the lazy form: any text without the opening
// marker, then optionally valid calls — as llama-server constrains auto calls
// once they start (ADR 0020). A marker that is a special token is held by
// the tool-call token trie (ADR 0034), so the lazy form works for it too.
std::optional<ApiError> finish_tool_grammar(grammar::ToolCallFormat format, StructuredRequest& out);

// The server-wide default grammar (tandem serve --grammar, --grammar-file, -j/--json-schema,
// -jf/--json-schema-file; null: none), after finish_tool_grammar. llama-server's precedence: the
// request's own constraint wins (response_format json_object / json_schema, json_schema, a
// non-empty grammar, format, or the grammar its tools built: required, named, or auto in the
// Hermes and Mistral syntaxes), and so does an explicit `"grammar": ""`; every other request
// follows `server_grammar` (grammar_source "server") — tools that built no grammar (auto in the
// Llama 3 syntax) included, whose output is still parsed for calls.
void apply_server_grammar(const std::shared_ptr<const grammar::Grammar>& server_grammar,
                          StructuredRequest& out);

// OpenAI messages -> what chat templates expect (as vLLM and transformers
// users pass them): an assistant tool call's `function.arguments` JSON
// string becomes the object it encodes.
void prepare_messages_for_template(nlohmann::ordered_json& messages);

}  // namespace tandem::server
