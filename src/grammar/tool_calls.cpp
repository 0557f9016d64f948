#include "grammar/tool_calls.h"

#include "grammar/json_schema.h"

namespace tandem::grammar {
namespace {

using nlohmann::ordered_json;

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

// One call object -> a ParsedToolCall; false when it is not one.
bool to_call(const ordered_json& j, ParsedToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  out.name = j["name"].get<std::string>();
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  if (!j.contains(key) || j[key].is_null()) {
    out.arguments = "{}";
  } else if (j[key].is_string()) {
    out.arguments = j[key].get<std::string>();
  } else {
    out.arguments = j[key].dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
  return true;
}

bool parse_json(const std::string& text, ordered_json& out) {
  try {
    out = ordered_json::parse(text);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

ParsedToolOutput parse_hermes(const std::string& text) {
  static const std::string kOpen = "<tool_call>", kClose = "</tool_call>";
  ParsedToolOutput out;
  std::string content;
  size_t at = 0;
  for (;;) {
    const size_t open = text.find(kOpen, at);
    if (open == std::string::npos) {
      content += text.substr(at);
      break;
    }
    content += text.substr(at, open - at);
    const size_t body = open + kOpen.size();
    size_t close = text.find(kClose, body);
    const size_t end = close == std::string::npos ? text.size() : close + kClose.size();
    if (close == std::string::npos) close = text.size();
    ordered_json j;
    ParsedToolCall call;
    if (parse_json(trim(text.substr(body, close - body)), j) && to_call(j, call)) {
      out.calls.push_back(std::move(call));
    } else {
      content += text.substr(open, end - open);
    }
    at = end;
  }
  out.content = out.calls.empty() ? text : trim(content);
  return out;
}

ParsedToolOutput parse_llama3(const std::string& text) {
  ParsedToolOutput out;
  std::string body = trim(text);
  if (body.rfind("<|python_tag|>", 0) == 0) body = trim(body.substr(14));
  if (body.empty() || body[0] != '{') return {text, {}};
  // One object, or several separated by ';'.
  std::vector<std::string> parts;
  ordered_json whole;
  if (parse_json(body, whole)) {
    parts.push_back(body);
  } else {
    size_t start = 0;
    for (size_t i = 0; i <= body.size(); ++i) {
      if (i == body.size() || body[i] == ';') {
        parts.push_back(trim(body.substr(start, i - start)));
        start = i + 1;
      }
    }
  }
  for (const auto& p : parts) {
    ordered_json j;
    ParsedToolCall call;
    if (!parse_json(p, j) || !to_call(j, call)) return {text, {}};
    out.calls.push_back(std::move(call));
  }
  return out;
}

ParsedToolOutput parse_mistral(const std::string& text) {
  static const std::string kMarker = "[TOOL_CALLS]";
  const size_t at = text.find(kMarker);
  if (at == std::string::npos) return {text, {}};
  ordered_json j;
  if (!parse_json(trim(text.substr(at + kMarker.size())), j)) return {text, {}};
  ParsedToolOutput out;
  if (j.is_object()) j = ordered_json::array({j});
  if (!j.is_array()) return {text, {}};
  for (const auto& c : j) {
    ParsedToolCall call;
    if (!to_call(c, call)) return {text, {}};
    out.calls.push_back(std::move(call));
  }
  out.content = trim(text.substr(0, at));
  return out;
}

// Rules content-0 .. content-(n-1) matching any text that does not contain
// `word` (whose first byte occurs nowhere else in it): content-k has seen
// the first k bytes of the word last. Each rule may end (the text stops
// there); reading the word's last byte is what none of them allows.
void add_text_without(SchemaConverter& c, const std::string& word, const std::string& name) {
  auto rule = [&](size_t k) { return name + "-" + std::to_string(k); };
  auto cls_char = [](char ch) {
    return ch == ']' || ch == '\\' || ch == '^' || ch == '-' ? std::string("\\") + ch : std::string(1, ch);
  };
  const std::string first = gbnf_literal(std::string(1, word[0]));
  for (size_t k = 0; k < word.size(); ++k) {
    std::string body;
    if (k > 0 && k + 1 < word.size())
      body += gbnf_literal(std::string(1, word[k])) + " " + rule(k + 1) + " | ";
    std::string excluded = cls_char(word[0]);
    if (k > 0) excluded += cls_char(word[k]);
    body += "[^" + excluded + "] " + rule(0) + " | " + first + " " + rule(1) + " | \"\"";
    c.add_rule(rule(k), body);
  }
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::llama3:
      return "llama3";
    case ToolCallFormat::mistral:
      return "mistral";
    default:
      return "hermes";
  }
}

ToolCallFormat detect_tool_call_format(const std::string& source) {
  if (source.find("[TOOL_CALLS]") != std::string::npos) return ToolCallFormat::mistral;
  if (source.find("<tool_call>") != std::string::npos) return ToolCallFormat::hermes;
  if (source.find("<|python_tag|>") != std::string::npos || source.find("ipython") != std::string::npos)
    return ToolCallFormat::llama3;
  return ToolCallFormat::hermes;
}

std::vector<std::string> tool_call_markers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::llama3:
      return {"<|python_tag|>"};
    case ToolCallFormat::mistral:
      return {"[TOOL_CALLS]"};
    default:
      return {"<tool_call>", "</tool_call>"};
  }
}

Expected<std::string> tool_call_gbnf(ToolCallFormat format, const std::vector<FunctionSpec>& functions,
                                     bool parallel, bool after_content) {
  if (functions.empty()) return invalid_argument("tool_call_gbnf: no functions");
  if (after_content && format == ToolCallFormat::llama3)
    return invalid_argument(
        "tool_call_gbnf: calls after free text are built for the hermes and mistral syntaxes only");
  SchemaConverter c;
  const char* args_key = format == ToolCallFormat::llama3 ? "parameters" : "arguments";
  std::string alternatives;
  for (size_t i = 0; i < functions.size(); ++i) {
    const FunctionSpec& f = functions[i];
    ordered_json schema = f.parameters.is_null() ? ordered_json{{"type", "object"}} : f.parameters;
    auto rule = c.add(schema, "fn" + std::to_string(i));
    if (!rule.ok()) return invalid_argument(f.name + ": " + rule.status().message());
    const std::string head = "{\"name\": " + ordered_json(f.name).dump() + ", \"" + args_key + "\": ";
    alternatives += (i ? " | " : "") + gbnf_literal(head) + " " + *rule + " \"}\"";
  }
  c.add_rule("call-object", alternatives);
  switch (format) {
    case ToolCallFormat::hermes:
      c.add_rule("tool-call", R"("<tool_call>\n" call-object "\n</tool_call>")");
      c.add_rule("calls", parallel ? R"(tool-call ( "\n" tool-call )*)" : "tool-call");
      if (after_content) {
        add_text_without(c, "<tool_call>", "content");
        c.add_rule("root", "content-0 calls?");
      } else {
        c.add_rule("root", "calls");
      }
      break;
    case ToolCallFormat::llama3:
      c.add_rule("root", parallel ? R"(call-object ( "; " call-object )*)" : "call-object");
      break;
    case ToolCallFormat::mistral:
      c.add_rule("calls", parallel ? R"("[TOOL_CALLS]" " "? "[" call-object ( ", " call-object )* "]")"
                                   : R"("[TOOL_CALLS]" " "? "[" call-object "]")");
      if (after_content) {
        add_text_without(c, "[TOOL_CALLS]", "content");
        c.add_rule("root", "content-0 calls?");
      } else {
        c.add_rule("root", "calls");
      }
      break;
  }
  return c.gbnf();
}

ParsedToolOutput parse_tool_calls(ToolCallFormat format, const std::string& text) {
  switch (format) {
    case ToolCallFormat::llama3:
      return parse_llama3(text);
    case ToolCallFormat::mistral:
      return parse_mistral(text);
    default:
      return parse_hermes(text);
  }
}

size_t tool_call_safe_prefix(ToolCallFormat format, const std::string& text) {
  if (format == ToolCallFormat::llama3) {
    // A JSON call is the whole message: nothing is safe once it starts with '{' or the tag.
    const std::string t = trim(text);
    if (t.empty() || t[0] == '{' || t[0] == '<' || std::string("<|python_tag|>").rfind(t, 0) == 0) return 0;
    return text.size();
  }
  const std::string marker = format == ToolCallFormat::mistral ? "[TOOL_CALLS]" : "<tool_call>";
  const size_t at = text.find(marker);
  if (at != std::string::npos) return at;
  for (size_t keep = std::min(text.size(), marker.size() - 1); keep > 0; --keep)
    if (text.compare(text.size() - keep, keep, marker, 0, keep) == 0) return text.size() - keep;
  return text.size();
}

}  // namespace tandem::grammar
