// Tool calls in a model's own syntax: which syntax a chat template uses, the
// grammar that forces a valid call (tool_choice "required" or a named
// function), and the parser that turns generated text into calls.
//
// Formats:
//   hermes  — Hermes / Qwen2.5 / Qwen3: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
//             several blocks for parallel calls;
//   llama3  — Llama 3.x JSON: {"name": ..., "parameters": {...}}, several joined by "; ";
//   mistral — [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (a space
//             after the marker allowed, as Mistral's templates write it).
// A marker may be a special token of the tokenizer (Mistral's [TOOL_CALLS],
// Llama 3.1's <|python_tag|>): the server keeps its text in the output it
// parses and lets the grammar's token trie hold it (tool_call_markers).
// The parser accepts "arguments" and "parameters" in every format, keeps the
// text outside the calls as content, and leaves text that does not parse as
// content (no calls), as vLLM's parsers do. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace tandem::grammar {

enum class ToolCallFormat { hermes, llama3, mistral };

const char* tool_call_format_name(ToolCallFormat format);
// From the chat template's source: "[TOOL_CALLS]" → mistral; "<|python_tag|>"
// or an "ipython" role → llama3; otherwise hermes (also for templates that
// name <tool_call>, and the bundled one).
ToolCallFormat detect_tool_call_format(const std::string& template_source);

struct FunctionSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // JSON Schema of the arguments; null: any object
};

// The marker strings of a format, opening one first: the tokens whose text
// is one of these are kept in the text the parser reads even when special.
std::vector<std::string> tool_call_markers(ToolCallFormat format);

// GBNF whose sentences are one call (parallel: one or more) to one of
// `functions`, with arguments valid for that function's schema. Schema
// errors name the function ("get_weather: unsupported ..."). With
// `after_content` (tool_choice auto; hermes and mistral) the calls are optional and
// may follow any text that does not contain the opening marker: the model
// writes freely, and once it opens a call the call must be valid.
Expected<std::string> tool_call_gbnf(ToolCallFormat format, const std::vector<FunctionSpec>& functions,
                                     bool parallel, bool after_content = false);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

struct ParsedToolOutput {
  std::string content;  // the text outside the calls, trimmed; the whole text when no call parsed
  std::vector<ParsedToolCall> calls;
};

ParsedToolOutput parse_tool_calls(ToolCallFormat format, const std::string& text);

// Where a call may start in streamed text: the length of the prefix of `text`
// that is plain content for certain (a call's opening marker, or a prefix of
// it at the end, is held back).
size_t tool_call_safe_prefix(ToolCallFormat format, const std::string& text);

}  // namespace tandem::grammar
