// The request bodies of llama-server's POST /completion and Ollama's POST
// /api/generate and /api/chat, parsed into the GenerationRequest every route
// runs (docs/api.md, ADR 0017). Unknown fields are ignored; a known field of
// the wrong type or out of range is a 400 ApiError naming it. No model or
// tokenizer knowledge here (as openai_request.h). Pure functions; thread-safe.
#pragma once

#include <string>
#include <variant>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace tandem::server {

// POST /completion's body as a GenerationRequest (endpoint completions):
// prompt (string or token ids), n_predict (-1: up to the context), seed (-1:
// random), repeat_penalty, logit_bias as [[id, bias], ...] or an object,
// cache_prompt (accepted; prefix reuse is always on and exact), and the
// sampling fields OpenAI spells the same way.
std::variant<GenerationRequest, ApiError> parse_llama_completion(const std::string& body);

enum class OllamaEndpoint { generate, chat };

struct OllamaRequest {
  GenerationRequest generation;
  std::string model;       // as the client named it (echoed back)
  bool load_only = false;  // empty prompt / messages: Ollama's "load the model" call
};

// /api/generate: model, prompt, system, raw, stream (default true), options
// {temperature, top_k, top_p, min_p, seed, num_predict, stop, repeat_penalty,
// presence_penalty, frequency_penalty}; unless raw, the prompt (and system)
// are rendered with the chat template as Ollama's template would.
// /api/chat: model, messages, tools, stream, options.
std::variant<OllamaRequest, ApiError> parse_ollama_request(OllamaEndpoint endpoint, const std::string& body);

}  // namespace tandem::server
