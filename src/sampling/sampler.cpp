#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::sampling {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// SplitMix64 finaliser: a bijective 64-bit mix with good avalanche.
inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t position_key(uint64_t seed, int64_t position) {
  return mix64(mix64(seed) ^ static_cast<uint64_t>(position));
}

inline double uniform_from(uint64_t key, int32_t token) {
  const uint64_t bits = mix64(key ^ static_cast<uint64_t>(static_cast<uint32_t>(token)));
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace

double noise_uniform(uint64_t seed, int64_t position, int32_t token) {
  return uniform_from(position_key(seed, position), token);
}

double gumbel_noise(uint64_t seed, int64_t position, int32_t token) {
  return -std::log(-std::log(noise_uniform(seed, position, token)));
}

int32_t Sampler::pick_processed(std::span<const float> processed, const SamplingParams& params,
                                int64_t position) const {
  int32_t best = -1;
  if (params.greedy()) {
    float best_logit = kMasked;
    for (size_t i = 0; i < processed.size(); ++i) {
      if (processed[i] > best_logit || (best < 0 && !std::isnan(processed[i]))) {
        best_logit = processed[i];
        best = static_cast<int32_t>(i);
      }
    }
    return best < 0 ? 0 : best;
  }
  const uint64_t key = position_key(params.seed, position);
  double best_score = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < processed.size(); ++i) {
    if (!(processed[i] > kMasked)) continue;  // masked or NaN
    const double g = -std::log(-std::log(uniform_from(key, static_cast<int32_t>(i))));
    const double score = static_cast<double>(processed[i]) + g;
    if (score > best_score) {
      best_score = score;
      best = static_cast<int32_t>(i);
    }
  }
  return best < 0 ? 0 : best;
}

int32_t Sampler::pick(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                      int64_t position) {
  row_.assign(logits.begin(), logits.end());
  if (params.greedy()) {
    process_logits_greedy(row_, params, history, scratch_);
  } else {
    process_logits(row_, params, history, scratch_);
  }
  return pick_processed(row_, params, position);
}

void Sampler::fill_logprobs(std::span<const float> processed, const SamplingParams& params, SampleResult& out) {
  float max_logit = kMasked;
  for (float l : processed) max_logit = std::max(max_logit, l);
  double total = 0.0;
  for (float l : processed)
    if (l > kMasked) total += std::exp(static_cast<double>(l - max_logit));
  const double log_total = std::log(total);
  auto logprob = [&](int32_t t) {
    return processed[t] > kMasked ? static_cast<float>(processed[t] - max_logit - log_total) : kMasked;
  };
  out.logprob = logprob(out.token);
  out.top.clear();
  const int32_t n = std::min<int32_t>(params.top_logprobs, static_cast<int32_t>(processed.size()));
  if (n <= 0) return;
  auto& order = scratch_.order;
  order.resize(processed.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int32_t a, int32_t b) {
    if (processed[a] != processed[b]) return processed[a] > processed[b];
    return a < b;
  });
  for (int32_t i = 0; i < n; ++i) out.top.push_back({order[i], logprob(order[i])});
}

SampleResult Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                             const TokenHistory& history, int64_t position, bool want_logprobs) {
  SampleResult out;
  out.token = pick(logits, params, history, position);
  if (want_logprobs || params.top_logprobs > 0) fill_logprobs(row_, params, out);
  return out;
}

}  // namespace tandem::sampling
