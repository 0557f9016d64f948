// The adaptive policy's estimator (docs/spec-speculative.md §4, with the
// confidence rule of docs/adr/0005-policy-confidence.md): samples in,
// speedup estimate and its 95% interval out. Pure functions, no state, no
// clock — the engine measures and the policy passes the milliseconds in, so
// tests drive it with any timings they like.
//
// Units: milliseconds; speedups are ratios (1.0 = as fast as classic decode).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::scheduler {

// Profiling takes at least kSamplesRequired qualifying samples and settles
// as soon as the interval clears the threshold; at kSamplesMax it settles by
// the point estimate (settle reason max_samples).
inline constexpr int kSamplesRequired = 4;
inline constexpr int kSamplesMax = 12;

// One profiled (or monitored) request: its timed plain steps and its rounds.
struct PolicySample {
  std::vector<double> plain_ms;  // each timed plain single-token step
  int rounds = 0;
  double round_ms = 0;  // draft + verify + overhead, summed over the rounds
  int64_t drafted = 0, accepted = 0;
  // A request counts once it ran at least one round and one plain step.
  bool qualifies() const { return rounds > 0 && !plain_ms.empty(); }
  // This request's own speedup: (accepted/rounds + 1) * mean plain / mean round.
  double speedup() const;
};

struct SpeedupEstimate {
  int samples = 0;
  // The pooled inputs of SPEC §4: median of per-request plain-step means,
  // mean round time, accepted tokens per round.
  double classic_step_ms = 0, round_ms = 0, accepted_len = 0;
  double acceptance_rate = 0;  // accepted / drafted (0 when nothing was drafted)
  int64_t rounds = 0, drafted = 0, accepted = 0;
  double speedup = 0;  // (accepted_len + 1) * classic_step_ms / round_ms
  // Spread: speedups are ratios of noisy times, so the spread is taken on
  // the log scale — log_stddev is the sample standard deviation of
  // ln(per-request speedup) — and the 95% interval is multiplicative:
  // speedup * exp(± t(n-1) * log_stddev / sqrt(n)). With one sample:
  // log_stddev 0 and no interval (low = high = speedup, `has_interval` false).
  double log_stddev = 0, low = 0, high = 0;
  bool has_interval = false;
};

// Requires at least one qualifying sample (a bug otherwise).
SpeedupEstimate estimate_speedup(const std::vector<PolicySample>& samples);

// The two-sided 95% quantile of Student's t with `df` degrees of freedom
// (df >= 1; 1.96 beyond the table).
double t_quantile_975(int df);

// The verdict as a function of the speedup, SPEC §4: <= 1.0 decline, >= 1.5
// enable, between: the hardware's static default. With the default fixed it
// is a single threshold: 1.0 (enable above it) when the default enables,
// 1.5 (enable at or above it) when it declines.
struct VerdictRule {
  bool static_default = true;
  double threshold() const { return static_default ? 1.0 : 1.5; }
  bool verdict(double speedup) const { return static_default ? speedup > 1.0 : speedup >= 1.5; }
  // The interval lies entirely on one side of the threshold: the verdict
  // both ends give, else nullopt (the samples cannot tell yet).
  std::optional<bool> confident(const SpeedupEstimate& e) const;
  // "<= 1.0: decline", ">= 1.5: enable" or "between 1.0 and 1.5: static default ..."
  std::string zone(double speedup) const;
};

}  // namespace tandem::scheduler
