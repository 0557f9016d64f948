#include "sampling/processors.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::sampling {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Strict total order: larger logit first, then lower token id. Makes every
// selection below a pure function of the row, whatever algorithm sorts it.
struct ByLogitDesc {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    if (logits[a] != logits[b]) return logits[a] > logits[b];
    return a < b;
  }
};

void collect_unmasked(std::span<const float> logits, std::vector<int32_t>& out) {
  out.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] != kMasked) out.push_back(static_cast<int32_t>(i));
}

}  // namespace

void apply_logit_bias(std::span<float> logits, const SamplingParams& p) {
  for (const auto& [token, bias] : p.logit_bias)
    if (token >= 0 && static_cast<size_t>(token) < logits.size()) logits[token] += bias;
}

void apply_repetition_penalty(std::span<float> logits, const TokenHistory& h, float penalty,
                              ProcessorScratch& s) {
  if (penalty == 1.0f) return;
  s.seen.resize(logits.size(), 0);
  auto visit = [&](std::span<const int32_t> tokens) {
    for (int32_t t : tokens) {
      if (t < 0 || static_cast<size_t>(t) >= logits.size() || s.seen[t]) continue;
      s.seen[t] = 1;
      logits[t] = logits[t] > 0.0f ? logits[t] / penalty : logits[t] * penalty;
    }
  };
  visit(h.prompt);
  visit(h.generated);
  for (auto span : {h.prompt, h.generated})
    for (int32_t t : span)
      if (t >= 0 && static_cast<size_t>(t) < logits.size()) s.seen[t] = 0;
}

void apply_presence_frequency(std::span<float> logits, const TokenHistory& h, float presence, float frequency,
                              ProcessorScratch& s) {
  if (presence == 0.0f && frequency == 0.0f) return;
  s.counts.resize(logits.size(), 0);
  for (int32_t t : h.generated)
    if (t >= 0 && static_cast<size_t>(t) < logits.size()) ++s.counts[t];
  for (int32_t t : h.generated) {
    if (t < 0 || static_cast<size_t>(t) >= logits.size() || s.counts[t] == 0) continue;
    logits[t] -= frequency * static_cast<float>(s.counts[t]) + presence;
    s.counts[t] = 0;  // apply once per distinct token; also resets the scratch
  }
}

void apply_temperature(std::span<float> logits, float temperature) {
  if (temperature == 1.0f || temperature <= 0.0f) return;
  for (float& l : logits) l /= temperature;
}

void apply_top_k(std::span<float> logits, int32_t k, ProcessorScratch& s) {
  if (k <= 0 || static_cast<size_t>(k) >= logits.size()) return;
  collect_unmasked(logits, s.order);
  if (s.order.size() <= static_cast<size_t>(k)) return;
  std::nth_element(s.order.begin(), s.order.begin() + (k - 1), s.order.end(), ByLogitDesc{logits.data()});
  // Everything after position k-1 in the partition ranks below the k-th token.
  for (size_t i = static_cast<size_t>(k); i < s.order.size(); ++i) logits[s.order[i]] = kMasked;
}

void apply_top_p(std::span<float> logits, float p, ProcessorScratch& s) {
  if (p >= 1.0f) return;
  collect_unmasked(logits, s.order);
  if (s.order.size() <= 1) return;
  const ByLogitDesc cmp{logits.data()};
  float max_logit = kMasked;
  for (int32_t i : s.order) max_logit = std::max(max_logit, logits[i]);
  double total = 0.0;
  for (int32_t i : s.order) total += std::exp(static_cast<double>(logits[i] - max_logit));
  // Sort a prefix big enough for typical nuclei first; fall back to a full sort.
  size_t sorted = std::min<size_t>(s.order.size(), 2048);
  for (;;) {
    std::partial_sort(s.order.begin(), s.order.begin() + sorted, s.order.end(), cmp);
    double mass = 0.0;
    size_t keep = 0;
    while (keep < sorted) {
      mass += std::exp(static_cast<double>(logits[s.order[keep]] - max_logit)) / total;
      ++keep;
      if (mass >= p) break;
    }
    if (mass >= p || sorted == s.order.size()) {
      for (size_t i = keep; i < s.order.size(); ++i) logits[s.order[i]] = kMasked;
      return;
    }
    sorted = s.order.size();
  }
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (min_p <= 0.0f) return;
  float max_logit = kMasked;
  for (float l : logits) max_logit = std::max(max_logit, l);
  // p_i >= min_p * p_max  <=>  l_i >= l_max + log(min_p)
  const float threshold = max_logit + std::log(min_p);
  for (float& l : logits)
    if (l < threshold) l = kMasked;
}

void process_logits_greedy(std::span<float> logits, const SamplingParams& p, const TokenHistory& h,
                           ProcessorScratch& s) {
  if (p.constraint) p.constraint->mask(logits, h.generated);
  apply_logit_bias(logits, p);
  apply_repetition_penalty(logits, h, p.repetition_penalty, s);
  apply_presence_frequency(logits, h, p.presence_penalty, p.frequency_penalty, s);
}

void process_logits(std::span<float> logits, const SamplingParams& p, const TokenHistory& h,
                    ProcessorScratch& s) {
  process_logits_greedy(logits, p, h, s);
  apply_temperature(logits, p.temperature);
  apply_top_k(logits, p.top_k, s);
  apply_top_p(logits, p.top_p, s);
  apply_min_p(logits, p.min_p);
}

}  // namespace tandem::sampling
