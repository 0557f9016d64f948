// Fuzz target: a request body -> parse_generation_request for both endpoints
// (/v1/completions and /v1/chat/completions). Every input must give a request
// or a 400 ApiError naming a field.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <variant>

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
  return 0;
}
