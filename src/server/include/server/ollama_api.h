// Ollama's API (docs/api.md) so Ollama clients work against tandem:
// GET /api/version, /api/tags, /api/ps, POST /api/show, and the response
// shapes of POST /api/generate and /api/chat (NDJSON streaming by default,
// one object with "stream": false; their bodies are parsed in
// compat_requests.h). Errors use Ollama's body {"error": "..."} with the HTTP
// status OpenAI's error would have. Model names match as
// Service::model_matches says (":latest" is the served model). Durations are
// nanoseconds, timestamps RFC 3339 UTC. The HTTP side is in
// compat_routes.cpp. Thread-safe: reads the Service only.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "server/api_error.h"
#include "server/compat_requests.h"
#include "server/service.h"

namespace tandem::server {

class GenerationRun;

// An ApiError in Ollama's shape, {"error": message}. A dead end (code no_allowed_token) that
// names a request field (its `param` on the OpenAI routes) ends the message with
// " (param: <field>)", e.g. "format".
HttpReply ollama_error(const ApiError& error);
// Its body, for a stream's last line.
nlohmann::json ollama_error_json(const ApiError& error);

HttpReply ollama_version();
HttpReply ollama_tags(const Service& svc);
HttpReply ollama_ps(const Service& svc);
HttpReply ollama_show(const Service& svc, const std::string& body);

// One streamed NDJSON object (done: false) carrying `text`.
nlohmann::json ollama_chunk_json(OllamaEndpoint endpoint, const std::string& model, const std::string& text);
// The final object (done: true, done_reason, counts and durations); `text` is
// the whole reply when not streamed, "" when streamed. `started`: when the
// request arrived (total_duration).
nlohmann::json ollama_final_json(OllamaEndpoint endpoint, const std::string& model, const GenerationRun& run,
                                 const std::string& text, std::chrono::steady_clock::time_point started);
// The reply to a load-only call.
nlohmann::json ollama_load_json(OllamaEndpoint endpoint, const std::string& model);

}  // namespace tandem::server
