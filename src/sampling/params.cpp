#include "sampling/params.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

namespace tandem::sampling {
namespace {

std::optional<ParamError> bad(const char* field, const std::string& what) {
  return ParamError{field, std::string(field) + " " + what};
}

// Shortest round-tripping-enough spelling of a float: "3", "0.5", "inf".
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

std::optional<ParamError> check_ranges(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f || p.temperature > 2.0f)
    return bad("temperature", "must be between 0 and 2, got " + num(p.temperature));
  if (p.top_k < 0) return bad("top_k", "must be >= 0 (0 disables it), got " + std::to_string(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p", "must be in (0, 1], got " + num(p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p", "must be in [0, 1], got " + num(p.min_p));
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    return bad("repetition_penalty", "must be > 0, got " + num(p.repetition_penalty));
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return bad("presence_penalty", "must be between -2 and 2, got " + num(p.presence_penalty));
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return bad("frequency_penalty", "must be between -2 and 2, got " + num(p.frequency_penalty));
  for (const auto& [token, bias] : p.logit_bias) {
    if (!(bias >= -100.0f && bias <= 100.0f) && bias != kNeverProduced)
      return bad("logit_bias", "value for token " + std::to_string(token) +
                                   " must be between -100 and 100, got " + num(bias));
  }
  if (p.top_logprobs < 0 || p.top_logprobs > 20)
    return bad("top_logprobs", "must be between 0 and 20, got " + std::to_string(p.top_logprobs));
  return std::nullopt;
}

std::optional<ParamError> check(const SamplingParams& p, int32_t vocab_size) {
  if (auto e = check_ranges(p)) return e;
  std::vector<char> banned;  // sized only when a token is banned
  int32_t n_banned = 0;
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || token >= vocab_size)
      return bad("logit_bias", "token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                                   std::to_string(vocab_size) + ")");
    if (bias != kNeverProduced) continue;
    banned.resize(static_cast<size_t>(vocab_size), 0);
    if (!banned[token]) ++n_banned;
    banned[token] = 1;
  }
  // Nothing left to pick: the sampler would have to produce a banned token.
  if (n_banned > 0 && n_banned == vocab_size)
    return bad("logit_bias", "bans every token of the vocabulary (" + std::to_string(vocab_size) +
                                 "): at least one must stay possible");
  return std::nullopt;
}

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

Status validate(const SamplingParams& p, int32_t vocab_size) {
  if (auto e = check(p, vocab_size)) return invalid_argument(e->message);
  return Status::Ok();
}

}  // namespace tandem::sampling
