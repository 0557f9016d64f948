// pick.h — the token a forward's output row gives a request: the forward's
// own pick where it made one (ForwardOptions::picks_only; on a GPU made on the
// device, ADR 0070 and 0072), else the sampler's pick of the row. For a plain
// greedy or plain sampled request both are the same token (Sampler and GPU
// tests), so a caller may ask for picks exactly when forward_pick_rule gives one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "model/forward.h"
#include "sampling/params.h"
#include "sampling/sampler.h"

namespace tandem::speculative {

// Whether a request's rows may come back as greedy picks only.
inline bool picks_suffice(const sampling::SamplingParams& params, bool want_logprobs) {
  return params.plain_greedy() && !want_logprobs;
}

// The rule by which a forward may pick the token at `position` of a request
// itself (ForwardOptions::pick_rules), or nullopt when the sampler needs the row.
inline std::optional<kernels::PickRule> forward_pick_rule(const sampling::SamplingParams& params,
                                                          bool want_logprobs, int64_t position) {
  if (want_logprobs) return std::nullopt;
  if (params.plain_greedy()) return kernels::PickRule{};
  if (params.plain_sampled()) return kernels::PickRule{params.temperature, 0, params.seed, position};
  return std::nullopt;
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
