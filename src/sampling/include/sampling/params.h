// SamplingParams: everything that decides which token a position gets.
//
// Validation lives here, once (check_ranges / check / validate): the server
// and the CLI accept the same ranges and report the same message, and the
// offending field comes back as data (ParamError::field), never parsed out of
// the message. Plain value types; pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sampling/constraint.h"

namespace tandem::sampling {

// The logit_bias of a token that must never be produced (llama-server's `false`): its logit
// becomes -infinity, which every sampler stage treats as masked.
inline constexpr float kNeverProduced = -std::numeric_limits<float>::infinity();

// A temperature below this is greedy, 0 included (vLLM's _SAMPLING_EPS). Dividing by a tiny
// temperature (1e-39, a denormal) would overflow every logit to +-infinity and leave no token to
// pick; at 1e-5 a logit would have to exceed 3.4e33 to overflow. Every path (classic steps,
// verify rows, drafters) decides through greedy(), so the choice cannot differ between them.
inline constexpr float kGreedyTemperature = 1e-5f;

struct SamplingParams {
  float temperature = 1.0f;  // below kGreedyTemperature (0 too) = greedy (argmax after bias and penalties)
  int32_t top_k = 0;         // 0 = disabled
  float top_p = 1.0f;        // 1 = disabled
  float min_p = 0.0f;        // 0 = disabled
  float repetition_penalty = 1.0f;  // HF/CTRL style, over prompt + generated tokens; 1 = disabled
  float presence_penalty = 0.0f;    // OpenAI style, over generated tokens
  float frequency_penalty = 0.0f;   // OpenAI style, over generated tokens
  // token id -> added to the logit; kNeverProduced (-infinity) bans the token. Entries add up.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // The seed the sampler uses. "No seed" exists only at the API edges, as an
  // empty std::optional<uint64_t>, resolved there (random_seed() or a fixed default).
  uint64_t seed = 0;
  int32_t top_logprobs = 0;  // number of alternatives to report (0 = none)
  // Structured outputs: the allowed next tokens given the generated prefix,
  // applied before everything else (constraint.h). Null: unconstrained. One
  // object per sequence (it caches along that sequence's prefix).
  std::shared_ptr<TokenConstraint> constraint;

  bool greedy() const { return temperature < kGreedyTemperature; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  // Greedy with nothing that changes the row first: the pick is the model row's
  // first largest logit above -infinity (kernels::greedy_pick), which a GPU
  // forward can compute on the device (ADR 0070).
  bool plain_greedy() const { return greedy() && !constraint && logit_bias.empty() && !has_penalties(); }
  // Sampled with a temperature and nothing else: the pick is the Gumbel-max of
  // the model row / temperature (kernels::PickRule), which a GPU forward can
  // compute on the device (ADR 0072).
  bool plain_sampled() const {
    return !greedy() && !constraint && logit_bias.empty() && !has_penalties() && top_k == 0 &&
           top_p >= 1.0f && min_p <= 0.0f;
  }
};

// A rejected parameter: `field` as the OpenAI API spells it ("temperature",
// "logit_bias", ...) and a message that names it.
struct ParamError {
  std::string field;
  std::string message;
};

// The ranges (OpenAI's where it defines them): temperature in [0, 2],
// top_p in (0, 1], min_p in [0, 1], top_k >= 0, repetition_penalty > 0 and
// finite, presence/frequency penalties in [-2, 2], logit_bias values in
// [-100, 100] or kNeverProduced, top_logprobs in [0, 20]. Other non-finite values are out of range.
// Needs no model: the first offending field in that order, or nullopt.
std::optional<ParamError> check_ranges(const SamplingParams& params);

// check_ranges, then every logit_bias token id in [0, vocab_size), and not every token banned.
std::optional<ParamError> check(const SamplingParams& params, int32_t vocab_size);

// A fresh random seed, for a request or a run that gave none. Thread-safe.
uint64_t random_seed();

// check() as a Status (InvalidArgument with the message) for callers that
// only report it.
Status validate(const SamplingParams& params, int32_t vocab_size);

}  // namespace tandem::sampling
