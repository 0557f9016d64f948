#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/gumbel.h"

namespace tandem::sampling {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

using gumbel::gumbel_of;
using gumbel::position_key;
using gumbel::uniform_from;

// Pruning table for the exact Gumbel-max below. G(u) = -log(-log(u)) is
// increasing, so an id whose logit trails the best score found so far by d
// cannot win when G(u) < d, i.e. when u < G^-1(d) = exp(-exp(-d)). kSkip[k]
// = G^-1(k / kSkipPerUnit): a uniform below kSkip[k] has G(u) < k /
// kSkipPerUnit, so comparing u against the entry at floor(d * kSkipPerUnit)
// rules an id out with one hash and no logarithm — all but ~exp(-d) of the
// trailing ids.
constexpr int kSkipPerUnit = 4;
constexpr int kSkipEntries = 40 * kSkipPerUnit + 1;  // d up to 40 (G < 37.5 for 53-bit uniforms)

struct SkipTable {
  double u[kSkipEntries];
  SkipTable() {
    for (int k = 0; k < kSkipEntries; ++k) u[k] = std::exp(-std::exp(-static_cast<double>(k) / kSkipPerUnit));
  }
};

}  // namespace

double noise_uniform(uint64_t seed, int64_t position, int32_t token) {
  return uniform_from(position_key(seed, position), token);
}

double gumbel_noise(uint64_t seed, int64_t position, int32_t token) {
  return gumbel_of(noise_uniform(seed, position, token));
}

int32_t Sampler::pick_processed(std::span<const float> processed, const SamplingParams& params,
                                int64_t position) const {
  int32_t best = -1;
  if (params.greedy()) {
    float best_logit = kMasked;
    // Only a logit above -infinity can be picked: a row with none (all masked or NaN) has no
    // token to give, and any id returned for it would be a token the request forbade.
    for (size_t i = 0; i < processed.size(); ++i) {
      if (processed[i] > best_logit) {
        best_logit = processed[i];
        best = static_cast<int32_t>(i);
      }
    }
    return best < 0 ? kNoToken : best;
  }
  // Exact Gumbel-max: the result is the lowest id with the highest score
  // l_i + G(u_i), exactly as if every score were computed. Start from the
  // highest logit's score so the pruning bound is tight from the first id;
  // then visit ids in order and compute G only where the table cannot rule
  // the id out. The bound keeps a margin far above double rounding, so a
  // skipped id's score is strictly below the best and cannot tie it.
  static const SkipTable table;
  const uint64_t key = position_key(params.seed, position);
  int32_t top = -1;
  for (size_t i = 0; i < processed.size(); ++i) {
    if (processed[i] > kMasked && (top < 0 || processed[i] > processed[top])) top = static_cast<int32_t>(i);
  }
  if (top < 0) return kNoToken;  // nothing above -infinity: no token is allowed
  best = top;
  double best_score = static_cast<double>(processed[top]) + gumbel_of(uniform_from(key, top));
  for (size_t i = 0; i < processed.size(); ++i) {
    if (!(processed[i] > kMasked) || static_cast<int32_t>(i) == top) continue;  // masked, NaN, done
    const double logit = static_cast<double>(processed[i]);
    const double u = uniform_from(key, static_cast<int32_t>(i));
    const double d = best_score - logit - 1e-7 * (1.0 + std::fabs(best_score) + std::fabs(logit));
    if (d >= 0.0 && u < table.u[static_cast<int>(std::min(d * kSkipPerUnit, double{kSkipEntries - 1}))])
      continue;
    const double score = logit + gumbel_of(u);
    if (score > best_score || (score == best_score && static_cast<int32_t>(i) < best)) {
      best_score = score;
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

int32_t Sampler::pick(std::span<const float> logits, const SamplingParams& params,
                      const TokenHistory& history, int64_t position) {
  row_.assign(logits.begin(), logits.end());
  if (params.greedy()) {
    process_logits_greedy(row_, params, history, scratch_);
  } else {
    process_logits(row_, params, history, scratch_);
  }
  return pick_processed(row_, params, position);
}

void Sampler::fill_logprobs(std::span<const float> processed, const SamplingParams& params,
                            SampleResult& out) {
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
  if (out.token == kNoToken) return out;
  if (want_logprobs || params.top_logprobs > 0) fill_logprobs(row_, params, out);
  return out;
}

}  // namespace tandem::sampling
