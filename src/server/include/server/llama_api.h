// llama-server's native routes (docs/api.md): POST /tokenize, /detokenize,
// /apply-template, GET /props, /slots, and the request and response shapes
// of POST /completion. Field names, defaults and response shapes follow
// llama-server; unknown fields are ignored as llama-server ignores them; a
// known field of the wrong type is a 400 naming it (OpenAI error body). The
// HTTP side (streaming) is in routes.cpp. Thread-safe: reads the Service only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/service.h"

namespace tandem::server {

class GenerationRun;

HttpReply llama_tokenize(const Service& svc, const std::string& body);
HttpReply llama_detokenize(const Service& svc, const std::string& body);
HttpReply llama_apply_template(const Service& svc, const std::string& body);
HttpReply llama_props(const Service& svc);
// `fail_on_no_slot`: 503 when every slot is busy (llama-server's ?fail_on_no_slot=1).
HttpReply llama_slots(const Service& svc, bool fail_on_no_slot);

// POST /completion's body as a GenerationRequest (endpoint completions):
// prompt (string or token ids), n_predict (-1: up to the context), seed (-1:
// random), repeat_penalty, logit_bias as [[id, bias], ...] or an object,
// cache_prompt (accepted; prefix reuse is always on and exact), and the
// sampling fields OpenAI spells the same way.
std::variant<GenerationRequest, ApiError> parse_llama_completion(const std::string& body);

// The final /completion object (also the last SSE event, with content "" when streamed).
nlohmann::json llama_completion_json(const GenerationRun& run, const std::string& model, bool streamed);
// One streamed /completion event's object for `content`.
nlohmann::json llama_chunk_json(const GenerationRun& run, const std::string& content,
                                int64_t tokens_predicted);

// Whether `s` is valid UTF-8 (a token piece that is not is sent as its bytes).
bool valid_utf8(const std::string& s);

}  // namespace tandem::server
