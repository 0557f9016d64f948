// SamplingParams: everything that decides which token a position gets.
//
// Validation lives here (validate()) so that the server and the CLI report
// the same message naming the offending field. Plain value type.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tandem::sampling {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax after bias and penalties)
  int32_t top_k = 0;                // 0 = disabled
  float top_p = 1.0f;               // 1 = disabled
  float min_p = 0.0f;               // 0 = disabled
  float repetition_penalty = 1.0f;  // HF/CTRL style, over prompt + generated tokens; 1 = disabled
  float presence_penalty = 0.0f;    // OpenAI style, over generated tokens
  float frequency_penalty = 0.0f;   // OpenAI style, over generated tokens
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> added to the logit
  uint64_t seed = 0;
  int32_t top_logprobs = 0;  // number of alternatives to report (0 = none)

  bool greedy() const { return temperature == 0.0f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// Checks ranges (OpenAI's where it defines them): temperature in [0, 2],
// top_p in (0, 1], min_p in [0, 1], top_k >= 0, repetition_penalty > 0,
// presence/frequency penalties in [-2, 2], logit_bias ids in [0, vocab) and
// values in [-100, 100], top_logprobs in [0, 20]. The message names the field
// as the OpenAI API spells it.
Status validate(const SamplingParams& params, int32_t vocab_size);

}  // namespace tandem::sampling
