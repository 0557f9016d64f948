#include "sampling/processors.h"

#include <algorithm>
#include <cmath>
#include <functional>
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

// The largest value by std::max from -infinity (NaN never wins): the sequential
// loop's value in four independent chains, so a 150k-entry row costs a quarter
// of the latency. Only a max of ±0 could come out with the other sign, and
// every caller only subtracts it from or adds it to other values.
float max_logit(std::span<const float> logits) {
  float m[4] = {kMasked, kMasked, kMasked, kMasked};
  const size_t n = logits.size(), body = n / 4 * 4;
  for (size_t i = 0; i < body; i += 4)
    for (size_t j = 0; j < 4; ++j) m[j] = std::max(m[j], logits[i + j]);
  for (size_t i = body; i < n; ++i) m[0] = std::max(m[0], logits[i]);
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// The top-k set by ByLogitDesc without sorting the row: one pass keeps the k
// best (value, id) seen so far in a heap whose top is the worst of them (ids
// rise during the pass, so a later equal value never displaces it); the
// worst kept pair then decides every entry. The same set as nth_element's,
// as ByLogitDesc is a strict total order on NaN-free rows (a row with NaN
// takes nth_element, as before).
bool worse(const RankedLogit& a, const RankedLogit& b) {
  return a.value != b.value ? a.value < b.value : a.id > b.id;
}
// Heap order: the worst pair on top.
bool heap_order(const RankedLogit& a, const RankedLogit& b) { return worse(b, a); }

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
  size_t unmasked = 0, nan = 0;  // counted without branches
  for (float l : logits) {
    unmasked += l != kMasked ? 1 : 0;
    nan += l != l ? 1 : 0;
  }
  if (unmasked <= static_cast<size_t>(k)) return;
  if (nan > 0) {
    collect_unmasked(logits, s.order);
    std::nth_element(s.order.begin(), s.order.begin() + (k - 1), s.order.end(), ByLogitDesc{logits.data()});
    // Everything after position k-1 in the partition ranks below the k-th token.
    for (size_t i = static_cast<size_t>(k); i < s.order.size(); ++i) logits[s.order[i]] = kMasked;
    return;
  }
  auto& heap = s.ranked;
  heap.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (l == kMasked) continue;
    if (heap.size() < static_cast<size_t>(k)) {
      heap.push_back({l, static_cast<int32_t>(i)});
      std::push_heap(heap.begin(), heap.end(), heap_order);
    } else if (l > heap.front().value) {
      std::pop_heap(heap.begin(), heap.end(), heap_order);
      heap.back() = {l, static_cast<int32_t>(i)};
      std::push_heap(heap.begin(), heap.end(), heap_order);
    }
  }
  const RankedLogit last = heap.front();  // the k-th best
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (l != kMasked && worse({l, static_cast<int32_t>(i)}, last)) logits[i] = kMasked;
  }
}

namespace {

// s.order = every unmasked entry at or above a threshold, in index order, when that is at
// least `want` entries (then among them are the `want` best by ByLogitDesc: an entry left out
// is below every one kept); false when the threshold let fewer through. The threshold: the
// (want/8 + 8)-th best of every 16th entry — no heap or sort over the whole row.
bool collect_best(std::span<const float> logits, size_t want, ProcessorScratch& s) {
  s.values.clear();
  for (size_t i = 0; i < logits.size(); i += 16)
    if (logits[i] != kMasked) s.values.push_back(logits[i]);
  const size_t rank = std::min(s.values.size(), want / 8 + 8);
  if (rank == 0) return false;
  std::nth_element(s.values.begin(), s.values.begin() + (rank - 1), s.values.end(), std::greater<float>());
  const float threshold = s.values[rank - 1];
  s.order.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] != kMasked && logits[i] >= threshold) s.order.push_back(static_cast<int32_t>(i));
  return s.order.size() >= want;
}

// The nucleus over s.order, sorted `sorted` entries at a time (then the whole of s.order):
// keep the smallest prefix whose mass reaches p. Returns how many of s.order it keeps (its
// first entries, in ByLogitDesc order), or 0 when the sorted prefix did not reach p and
// s.order is not the whole row (`whole`): the caller then retries over the whole row.
size_t nucleus(std::span<const float> logits, float p, float max_l, double total, size_t sorted, bool whole,
               ProcessorScratch& s) {
  const ByLogitDesc cmp{logits.data()};
  for (;;) {
    std::partial_sort(s.order.begin(), s.order.begin() + sorted, s.order.end(), cmp);
    double mass = 0.0;
    size_t keep = 0;
    while (keep < sorted) {
      mass += std::exp(static_cast<double>(logits[s.order[keep]] - max_l)) / total;
      ++keep;
      if (mass >= p) break;
    }
    if (mass >= p || (whole && sorted == s.order.size())) return keep;
    if (!whole) return 0;
    sorted = s.order.size();
  }
}

}  // namespace

void apply_top_p(std::span<float> logits, float p, ProcessorScratch& s) {
  if (p >= 1.0f) return;
  collect_unmasked(logits, s.order);
  const size_t unmasked = s.order.size();
  if (unmasked <= 1) return;
  const float max_l = max_logit(logits);  // over the whole row: -infinity entries cannot raise it
  double total = 0.0;                     // over the unmasked entries in index order
  for (int32_t i : s.order) total += std::exp(static_cast<double>(logits[i] - max_l));
  // Sort a prefix big enough for typical nuclei first: on a NaN-free row, its entries picked by
  // collect_best (the same entries in the same order as a heap over the whole row, ByLogitDesc
  // being a strict total order there); else, or when the nucleus is longer, the whole row.
  const size_t sorted = std::min<size_t>(unmasked, 2048);
  if (sorted < unmasked && std::none_of(logits.begin(), logits.end(), [](float l) { return l != l; }) &&
      collect_best(logits, sorted, s)) {
    if (const size_t keep = nucleus(logits, p, max_l, total, sorted, /*whole=*/false, s); keep > 0) {
      const int32_t last = s.order[keep - 1];
      const ByLogitDesc cmp{logits.data()};
      for (size_t i = 0; i < logits.size(); ++i)
        if (logits[i] != kMasked && cmp(last, static_cast<int32_t>(i))) logits[i] = kMasked;
      return;
    }
  }
  if (s.order.size() != unmasked) collect_unmasked(logits, s.order);
  const size_t keep = nucleus(logits, p, max_l, total, sorted, /*whole=*/true, s);
  for (size_t i = keep; i < s.order.size(); ++i) logits[s.order[i]] = kMasked;
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (min_p <= 0.0f) return;
  // p_i >= min_p * p_max  <=>  l_i >= l_max + log(min_p)
  const float threshold = max_logit(logits) + std::log(min_p);
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
