// pick.h — the token a forward's output row gives a request: the forward's
// own pick where it made one (ForwardOptions::picks_only; on a GPU made on the
// device, ADR 0070 and 0072), else the sampler's pick of the row. For a plain
// greedy or plain sampled request both are the same token (Sampler and GPU
// tests), so a caller may ask for picks exactly when forward_pick_rule gives one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/forward.h"
#include "sampling/params.h"
#include "sampling/sampler.h"

namespace tandem::speculative {

// The rule by which a forward may pick the token at `position` of a request
// itself (ForwardOptions::pick_rules), or nullopt when the sampler needs the row.
inline std::optional<kernels::PickRule> forward_pick_rule(const sampling::SamplingParams& params,
                                                          bool want_logprobs, int64_t position) {
  if (want_logprobs) return std::nullopt;
  if (params.plain_greedy()) return kernels::PickRule{};
  if (params.plain_sampled()) return kernels::PickRule{params.temperature, 0, params.seed, position};
  return std::nullopt;
}

// Options asking for the picks of `count` output rows whose tokens sit at
// positions first, first + 1, … where forward_pick_rule allows (else the
// rows); `rules` holds the sampled rules the options point to (keep it alive
// until the run).
inline model::ForwardOptions pick_options(const sampling::SamplingParams& params, bool want_logprobs,
                                          int64_t first, int64_t count,
                                          std::vector<kernels::PickRule>& rules) {
  model::ForwardOptions o;
  rules.clear();
  const auto rule = forward_pick_rule(params, want_logprobs, first);
  o.picks_only = rule.has_value();
  if (rule && rule->temperature > 0.0f) {
    for (int64_t j = 0; j < count; ++j) {
      rules.push_back(*rule);
      rules.back().position = first + j;
    }
    o.pick_rules = rules;
  }
  return o;
}

// Output row `row`'s token (sampling::kNoToken where it allows none; the row
// itself is then on the host, ForwardOutput::picks).
inline int32_t pick_row(sampling::Sampler& sampler, const model::ForwardOutput& out, int64_t row,
                        const sampling::SamplingParams& params, const sampling::TokenHistory& history,
                        int64_t position) {
  if (!out.picks.empty() && out.picks[row] >= 0) return out.picks[row];
  return sampler.pick(std::span<const float>(out.logits_row(row), static_cast<size_t>(out.vocab)), params,
                      history, position);
}

}  // namespace tandem::speculative
