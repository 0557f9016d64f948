// The OpenAI shapes of tool calls: a finished choice's chat message
// ({"role", "content", "tool_calls"}) and the streamed tool_calls delta,
// from the text the model generated in its own tool-call syntax
// (grammar/tool_calls.h). Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/structured_request.h"

namespace tandem::server {

struct ToolCallReply {
  nlohmann::json message;  // role, content (null when only calls), tool_calls (when any)
  nlohmann::json calls;    // the tool_calls array (empty when none)
  std::string content;     // the text outside the calls
  bool has_calls = false;
};

// `call_id_prefix` makes the ids ("call_<prefix>_<k>"); with
// parallel_tool_calls false only the first call is kept.
ToolCallReply tool_call_reply(const std::string& text, const StructuredRequest& request,
                              const std::string& call_id_prefix);

// The calls as a streamed delta's tool_calls (each with its "index").
nlohmann::json tool_call_deltas(const nlohmann::json& calls);

}  // namespace tandem::server
