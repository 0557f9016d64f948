#include "server/tool_call_reply.h"

namespace tandem::server {

using nlohmann::json;

ToolCallReply tool_call_reply(const std::string& text, const StructuredRequest& request,
                              const std::string& call_id_prefix) {
  ToolCallReply out;
  const grammar::ParsedToolOutput parsed = grammar::parse_tool_calls(request.format, text);
  out.content = parsed.content;
  out.calls = json::array();
  for (size_t k = 0; k < parsed.calls.size(); ++k) {
    if (k > 0 && !request.parallel_tool_calls) break;
    out.calls.push_back(
        {{"id", "call_" + call_id_prefix + "_" + std::to_string(k)},
         {"type", "function"},
         {"function", {{"name", parsed.calls[k].name}, {"arguments", parsed.calls[k].arguments}}}});
  }
  out.has_calls = !out.calls.empty();
  out.message = {{"role", "assistant"},
                 {"content", out.has_calls && out.content.empty() ? json(nullptr) : json(out.content)}};
  if (out.has_calls) out.message["tool_calls"] = out.calls;
  return out;
}

json tool_call_deltas(const json& calls) {
  json deltas = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    json d = calls[k];
    d["index"] = k;
    deltas.push_back(std::move(d));
  }
  return deltas;
}

}  // namespace tandem::server
