// llama-server's native routes (docs/api.md): POST /tokenize, /detokenize,
// /apply-template, GET /props, /slots, and the response shapes of POST
// /completion (its body is parsed in compat_requests.h). Field names and
// shapes follow llama-server; unknown fields are ignored as llama-server
// ignores them; a known field of the wrong type is a 400 naming it (OpenAI
// error body). The HTTP side (streaming) is in compat_routes.cpp.
// Thread-safe: reads the Service only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "server/api_error.h"
#include "server/compat_requests.h"
#include "server/service.h"

namespace tandem::server {

class GenerationRun;

HttpReply llama_tokenize(const Service& svc, const std::string& body);
HttpReply llama_detokenize(const Service& svc, const std::string& body);
HttpReply llama_apply_template(const Service& svc, const std::string& body);
HttpReply llama_props(const Service& svc);
// `fail_on_no_slot`: 503 when every slot is busy (llama-server's ?fail_on_no_slot=1).
HttpReply llama_slots(const Service& svc, bool fail_on_no_slot);

// The final /completion object (also the last SSE event, with content "" when streamed).
nlohmann::json llama_completion_json(const GenerationRun& run, const std::string& model, bool streamed);
// One streamed /completion event's object for `content`.
nlohmann::json llama_chunk_json(const GenerationRun& run, const std::string& content,
                                int64_t tokens_predicted);

// Whether `s` is valid UTF-8 (a token piece that is not is sent as its bytes).
bool valid_utf8(const std::string& s);

}  // namespace tandem::server
