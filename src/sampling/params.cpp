#include "sampling/params.h"

#include <cmath>
#include <string>

namespace tandem::sampling {
namespace {

Status bad(const char* field, const std::string& what) {
  return invalid_argument(std::string(field) + " " + what);
}

}  // namespace

Status validate(const SamplingParams& p, int32_t vocab_size) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f || p.temperature > 2.0f)
    return bad("temperature", "must be between 0 and 2, got " + std::to_string(p.temperature));
  if (p.top_k < 0) return bad("top_k", "must be >= 0 (0 disables it), got " + std::to_string(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return bad("top_p", "must be in (0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    return bad("min_p", "must be in [0, 1], got " + std::to_string(p.min_p));
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    return bad("repetition_penalty", "must be > 0, got " + std::to_string(p.repetition_penalty));
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return bad("presence_penalty", "must be between -2 and 2, got " + std::to_string(p.presence_penalty));
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return bad("frequency_penalty", "must be between -2 and 2, got " + std::to_string(p.frequency_penalty));
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || token >= vocab_size)
      return bad("logit_bias", "token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                                   std::to_string(vocab_size) + ")");
    if (!(bias >= -100.0f && bias <= 100.0f))
      return bad("logit_bias", "value for token " + std::to_string(token) + " must be between -100 and 100");
  }
  if (p.top_logprobs < 0 || p.top_logprobs > 20)
    return bad("top_logprobs", "must be between 0 and 20, got " + std::to_string(p.top_logprobs));
  return Status::Ok();
}

}  // namespace tandem::sampling
