// Fuzz target: a request body -> parse_generation_request for both endpoints
// (/v1/completions and /v1/chat/completions), and the llama-server and Ollama
// parsers of compat_requests.h (/completion, /api/generate, /api/chat), which
// share its field readers. Every input must give a request or a 400 ApiError
// naming a field.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <variant>

#include "server/compat_requests.h"
#include "server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::server;
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (Endpoint e : {Endpoint::completions, Endpoint::chat_completions}) {
    ParseResult r = parse_generation_request(e, body);
    if (const auto* req = std::get_if<GenerationRequest>(&r)) {
      if (req->n < 1 || req->n > kMaxChoices || req->stop.size() > kMaxStopSequences) std::abort();
      if (req->prompt_text && !req->prompt_tokens.empty()) std::abort();  // at most one prompt form
    }
  }
  auto check_error = [](const ApiError& e) {
    if (e.http_status != 400 || !e.param) std::abort();
  };
  auto llama = parse_llama_completion(body);
  if (const auto* e = std::get_if<ApiError>(&llama)) check_error(*e);
  for (OllamaEndpoint e : {OllamaEndpoint::generate, OllamaEndpoint::chat}) {
    auto ollama = parse_ollama_request(e, body);
    if (const auto* err = std::get_if<ApiError>(&ollama)) check_error(*err);
  }
  return 0;
}
