// The seeded sampler: the token at absolute position `position` is
//   argmax_i( processed_logit_i + G(seed, position, i) )
// where processed logits already include 1/temperature (processors.h) and G
// is Gumbel noise from a counter-based hash of (seed, position, token id).
// Temperature 0 (any temperature below kGreedyTemperature, params.h) is the
// plain argmax of the bias/penalty-processed logits.
//
// Because the pick is a pure function of (logits row, params, history, seed,
// position), classic decode and speculative verify pick the same token at
// every position, and a drafter using the same noise tends to agree with the
// target — see docs/adr/0002-seeded-sampler.md. Ties go to the lower token id.
//
// When the processed row leaves no token (every logit -infinity or NaN: a
// grammar whose next tokens are all banned by logit_bias, say) there is
// nothing to pick: pick() returns kNoToken rather than an arbitrary id, and
// no_allowed_token() (dead_end.h) says why. Callers stop the sequence there.
//
// Sampler holds scratch only; one per engine thread. No allocation after the
// first call for a given vocabulary size.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/params.h"
#include "sampling/processors.h"

namespace tandem::sampling {

// Uniform in (0, 1), from the 53 high bits of the hash; never 0 or 1.
double noise_uniform(uint64_t seed, int64_t position, int32_t token);
// Standard Gumbel noise -log(-log(u)).
double gumbel_noise(uint64_t seed, int64_t position, int32_t token);

// What pick() returns, and SampleResult::token holds, when no token is allowed.
inline constexpr int32_t kNoToken = -1;

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = kNoToken;       // kNoToken: nothing allowed (then no logprobs)
  float logprob = 0.0f;           // of the chosen token under the processed distribution
  std::vector<TokenLogprob> top;  // params.top_logprobs alternatives, most likely first
};

class Sampler {
 public:
  // Samples one position. `logits` is the model's raw row (not modified).
  // `history` holds the tokens before `position`. Logprobs (chosen + top-n)
  // come from the processed distribution: log_softmax of the processed row
  // (at temperature 0, of the bias/penalty-processed row at temperature 1).
  SampleResult sample(std::span<const float> logits, const SamplingParams& params,
                      const TokenHistory& history, int64_t position, bool want_logprobs = false);

  // Only the token id: the fast path used by decode, verify and drafters.
  // kNoToken when the processed row allows no token.
  int32_t pick(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
               int64_t position);

 private:
  int32_t pick_processed(std::span<const float> processed, const SamplingParams& params,
                         int64_t position) const;
  void fill_logprobs(std::span<const float> processed, const SamplingParams& params, SampleResult& out);

  std::vector<float> row_;
  ProcessorScratch scratch_;
};

}  // namespace tandem::sampling
