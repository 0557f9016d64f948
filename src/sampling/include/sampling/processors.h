// Logit processors, applied in place to one row of logits in this fixed
// order (Hugging Face's order for the warpers, after the structured-output
// mask, so the truncations only ever see tokens the grammar allows):
//   constraint mask (constraint.h) -> logit_bias -> repetition penalty -> presence/frequency penalties
//   -> temperature -> top-k -> top-p -> min-p
// Masked tokens become -infinity. Every step is a pure function of the row,
// the parameters and the token history, so classic decode and speculative
// verify process a position identically. Thread-compatible; no allocation
// beyond the caller-provided scratch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/params.h"

namespace tandem::sampling {

// The tokens before the position being sampled.
struct TokenHistory {
  std::span<const int32_t> prompt;
  std::span<const int32_t> generated;
};

// A logit and its token id (apply_top_k's heap entries).
struct RankedLogit {
  float value;
  int32_t id;
};

// Scratch space reused across calls (sized to the vocabulary on first use).
struct ProcessorScratch {
  std::vector<int32_t> order;
  std::vector<RankedLogit> ranked;  // apply_top_k's heap
  std::vector<float> values;        // apply_top_p's sample of the row
  std::vector<uint8_t> seen;
  std::vector<int32_t> counts;
};

void apply_logit_bias(std::span<float> logits, const SamplingParams& p);
// HF/CTRL: for every token in prompt or generated, logit > 0 ? logit / r : logit * r.
void apply_repetition_penalty(std::span<float> logits, const TokenHistory& h, float penalty,
                              ProcessorScratch& s);
// OpenAI: logit -= frequency * count + presence * (count > 0), over generated tokens.
void apply_presence_frequency(std::span<float> logits, const TokenHistory& h, float presence, float frequency,
                              ProcessorScratch& s);
void apply_temperature(std::span<float> logits, float temperature);
// Keeps the k largest (ties broken by lower token id), masks the rest.
void apply_top_k(std::span<float> logits, int32_t k, ProcessorScratch& s);
// Keeps the smallest prefix of tokens sorted by (probability desc, id asc)
// whose probability mass reaches p (always at least one token).
void apply_top_p(std::span<float> logits, float p, ProcessorScratch& s);
// Masks tokens whose probability is below min_p * (largest probability).
void apply_min_p(std::span<float> logits, float min_p);

// The whole chain for a sampled (temperature > 0) position.
void process_logits(std::span<float> logits, const SamplingParams& p, const TokenHistory& h,
                    ProcessorScratch& s);
// The chain for a greedy position: bias and penalties only (temperature and
// the truncations cannot change the argmax).
void process_logits_greedy(std::span<float> logits, const SamplingParams& p, const TokenHistory& h,
                           ProcessorScratch& s);

}  // namespace tandem::sampling
