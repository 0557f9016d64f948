#include "server/structured_request.h"

#include "grammar/json_schema.h"
#include "server/request_fields.h"

namespace tandem::server {
namespace {

using nlohmann::ordered_json;

struct Fail {
  ApiError error;
};

[[noreturn]] void fail(const std::string& param, const std::string& message) {
  throw Fail{bad_request(param, message)};
}

const ordered_json* field(const ordered_json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::shared_ptr<const grammar::Grammar> compile(const std::string& gbnf, const std::string& param) {
  auto g = grammar::parse_gbnf(gbnf);
  if (!g.ok()) fail(param, "'" + param + "': " + g.status().message());
  return std::make_shared<const grammar::Grammar>(std::move(*g));
}

std::shared_ptr<const grammar::Grammar> compile_schema(const ordered_json& schema, const std::string& param) {
  if (!schema.is_object() && !schema.is_boolean())
    fail(param, "'" + param + "' must be a JSON Schema object");
  auto text = grammar::json_schema_to_gbnf(schema);
  if (!text.ok()) fail(param, "'" + param + "': " + text.status().message());
  return compile(*text, param);
}

void set_grammar(StructuredRequest& out, std::shared_ptr<const grammar::Grammar> g,
                 const std::string& source) {
  if (out.grammar)
    fail(source,
         "'" + source + "' and '" + out.grammar_source + "' both constrain the output; send one of them");
  out.grammar = std::move(g);
  out.grammar_source = source;
}

void parse_response_format(const ordered_json& body, StructuredRequest& out) {
  const ordered_json* rf = field(body, "response_format");
  if (!rf) return;
  if (!rf->is_object()) fail("response_format", "'response_format' must be an object");
  const ordered_json* type = field(*rf, "type");
  if (!type || !type->is_string()) fail("response_format.type", "'response_format.type' must be a string");
  const std::string t = type->get<std::string>();
  if (t == "text") return;
  if (t == "json_object") {
    // llama-server also takes a schema here.
    const ordered_json* schema = field(*rf, "schema");
    set_grammar(out,
                schema ? compile_schema(*schema, "response_format.schema")
                       : compile(grammar::json_object_gbnf(), "response_format"),
                "response_format");
    return;
  }
  if (t == "json_schema") {
    const ordered_json* js = field(*rf, "json_schema");
    if (!js || !js->is_object())
      fail("response_format.json_schema", "'response_format.json_schema' must be an object with a 'schema'");
    if (const ordered_json* name = field(*js, "name"); name && !name->is_string())
      fail("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
    if (const ordered_json* strict = field(*js, "strict"); strict && !strict->is_boolean())
      fail("response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean");
    const ordered_json* schema = field(*js, "schema");
    set_grammar(
        out, compile_schema(schema ? *schema : ordered_json::object(), "response_format.json_schema.schema"),
        "response_format");
    return;
  }
  fail("response_format.type",
       "unknown 'response_format.type' '" + t + "'; accepted values: text, json_object, json_schema");
}

void parse_tools(const ordered_json& body, bool chat, StructuredRequest& out) {
  const ordered_json* tools = field(body, "tools");
  if (tools && !chat) fail("tools", "'tools' needs /v1/chat/completions");
  if (tools) {
    if (!tools->is_array()) fail("tools", "'tools' must be an array");
    out.tools = *tools;
    for (size_t i = 0; i < tools->size(); ++i) {
      const ordered_json& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || t.value("type", std::string()) != "function")
        fail(where + ".type", "'" + where + ".type' must be \"function\"");
      const ordered_json* fn = field(t, "function");
      if (!fn || !fn->is_object()) fail(where + ".function", "'" + where + ".function' must be an object");
      const ordered_json* name = field(*fn, "name");
      if (!name || !name->is_string() || name->get<std::string>().empty())
        fail(where + ".function.name", "'" + where + ".function.name' must be a non-empty string");
      grammar::FunctionSpec spec{name->get<std::string>(), nullptr};
      if (const ordered_json* params = field(*fn, "parameters")) {
        if (!params->is_object())
          fail(where + ".function.parameters",
               "'" + where + ".function.parameters' must be a JSON Schema object");
        spec.parameters = *params;
      }
      out.functions.push_back(std::move(spec));
    }
  }
  if (const ordered_json* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) fail("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    out.parallel_tool_calls = p->get<bool>();
  }
  const ordered_json* choice = field(body, "tool_choice");
  if (!choice) return;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") {
      out.tool_choice = ToolChoice::none;
    } else if (c == "auto") {
      out.tool_choice = ToolChoice::auto_;
    } else if (c == "required") {
      out.tool_choice = ToolChoice::required;
    } else {
      fail("tool_choice", "unknown 'tool_choice' '" + c + "'; accepted values: none, auto, required, or " +
                              "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  } else if (choice->is_object()) {
    const ordered_json* fn = field(*choice, "function");
    const ordered_json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    if (choice->value("type", std::string()) != "function" || !name || !name->is_string())
      fail("tool_choice",
           "'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    out.tool_choice = ToolChoice::function;
    out.named_function = name->get<std::string>();
    bool found = false;
    for (const auto& f : out.functions) found = found || f.name == out.named_function;
    if (!found)
      fail("tool_choice",
           "'tool_choice' names function '" + out.named_function + "', which is not in 'tools'");
  } else {
    fail("tool_choice", "'tool_choice' must be a string or an object");
  }
  if ((out.tool_choice == ToolChoice::required || out.tool_choice == ToolChoice::function) &&
      out.functions.empty())
    fail("tool_choice", "'tool_choice' requires a tool call but 'tools' is empty");
  if ((out.tool_choice == ToolChoice::required || out.tool_choice == ToolChoice::function) && out.grammar)
    fail("tool_choice",
         "'tool_choice' forces a tool call; it cannot be combined with '" + out.grammar_source + "'");
}

}  // namespace

std::optional<ApiError> parse_structured(ordered_json body, bool chat, StructuredRequest& out) {
  try {
    if (chat && body.contains("messages")) out.messages = std::move(body["messages"]);
    parse_response_format(body, out);
    if (const ordered_json* schema = field(body, "json_schema"))
      set_grammar(out, compile_schema(*schema, "json_schema"), "json_schema");
    if (const ordered_json* g = field(body, "grammar")) {
      if (!g->is_string()) fail("grammar", "'grammar' must be a string of GBNF rules");
      if (!g->get<std::string>().empty())
        set_grammar(out, compile(g->get<std::string>(), "grammar"), "grammar");
      else
        out.grammar_declined = true;
    }
    parse_tools(body, chat, out);
    // The arguments schemas of the functions a call may be forced to: checked here (400), built later.
    if (out.tool_choice == ToolChoice::required || out.tool_choice == ToolChoice::function) {
      for (size_t i = 0; i < out.functions.size(); ++i) {
        const auto& f = out.functions[i];
        if (out.tool_choice == ToolChoice::function && f.name != out.named_function) continue;
        if (f.parameters.is_null()) continue;
        auto text = grammar::json_schema_to_gbnf(f.parameters);
        const std::string param = "tools[" + std::to_string(i) + "].function.parameters";
        if (!text.ok()) fail(param, "'" + param + "': " + text.status().message());
      }
    }
  } catch (const Fail& f) {
    return f.error;
  }
  return std::nullopt;
}

std::optional<ApiError> parse_ollama_format(const ordered_json& format, StructuredRequest& out) {
  try {
    if (format.is_null() || (format.is_string() && format.get<std::string>().empty())) return std::nullopt;
    if (format.is_string()) {
      // Ollama accepts "json" only; anything else is its "invalid format" error.
      if (format.get<std::string>() != "json")
        fail("format", "unknown 'format' '" + format.get<std::string>() +
                           "'; accepted values: \"json\" or a JSON Schema object");
      set_grammar(out, compile(grammar::json_object_gbnf(), "format"), "format");
    } else if (format.is_object()) {
      set_grammar(out, compile_schema(format, "format"), "format");
    } else {
      fail("format", "'format' must be \"json\" or a JSON Schema object");
    }
  } catch (const Fail& f) {
    return f.error;
  }
  return std::nullopt;
}

std::optional<ApiError> finish_tool_grammar(grammar::ToolCallFormat format, StructuredRequest& out) {
  out.format = format;
  if (out.tool_choice == ToolChoice::auto_ && !out.functions.empty() && !out.grammar &&
      format != grammar::ToolCallFormat::llama3) {
    // Free text, and valid calls once the model opens one. Where an arguments
    // schema cannot be compiled, auto stays unconstrained (it promised nothing).
    auto text = grammar::tool_call_gbnf(format, out.functions, out.parallel_tool_calls, true);
    auto g = text.ok() ? grammar::parse_gbnf(*text) : Expected<grammar::Grammar>(text.status());
    if (g.ok()) {
      out.grammar = std::make_shared<const grammar::Grammar>(std::move(*g));
      out.grammar_source = "tools";
    }
    return std::nullopt;
  }
  if (out.tool_choice != ToolChoice::required && out.tool_choice != ToolChoice::function) return std::nullopt;
  std::vector<grammar::FunctionSpec> allowed;
  for (const auto& f : out.functions)
    if (out.tool_choice == ToolChoice::required || f.name == out.named_function) allowed.push_back(f);
  auto text = grammar::tool_call_gbnf(format, allowed, out.parallel_tool_calls);
  if (!text.ok()) return bad_request("tools", "'tools': " + text.status().message());
  auto g = grammar::parse_gbnf(*text);
  if (!g.ok()) return bad_request("tools", "'tools': " + g.status().message());
  out.grammar = std::make_shared<const grammar::Grammar>(std::move(*g));
  out.grammar_source = "tool_choice";
  return std::nullopt;
}

void apply_server_grammar(const std::shared_ptr<const grammar::Grammar>& server_grammar,
                          StructuredRequest& out) {
  // Tools count as the request's constraint only through the grammar they built: where none was
  // (auto in the Llama 3 syntax, an arguments schema that cannot be compiled), the server's applies,
  // as llama-server's chat route leaves `grammar` to the server's default when the template
  // builds none.
  if (!server_grammar || out.grammar || out.grammar_declined) return;
  out.grammar = server_grammar;
  out.grammar_source = "server";
}

void prepare_messages_for_template(ordered_json& messages) {
  for (auto& m : messages) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      auto& fn = call["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      // Too deep to copy and render safely (request_fields.h): the string as sent, like non-JSON.
      if (fields::nested_deeper_than(fn["arguments"].get_ref<const std::string&>(), fields::kMaxJsonDepth))
        continue;
      try {
        fn["arguments"] = ordered_json::parse(fn["arguments"].get<std::string>());
      } catch (const std::exception&) {
        // Not JSON: the template gets the string as sent.
      }
    }
  }
}

}  // namespace tandem::server
