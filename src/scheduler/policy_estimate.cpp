#include "scheduler/policy_estimate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace tandem::scheduler {
namespace {

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

double PolicySample::speedup() const {
  const double accepted_len = static_cast<double>(accepted) / rounds;
  return (accepted_len + 1.0) * mean(plain_ms) / (round_ms / rounds);
}

double t_quantile_975(int df) {
  // Student's t, 0.975 quantile, df = 1..30 (any statistics table).
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  TANDEM_CHECK(df >= 1);
  return df <= 30 ? kTable[df - 1] : 1.96;
}

SpeedupEstimate estimate_speedup(const std::vector<PolicySample>& samples) {
  TANDEM_CHECK(!samples.empty());
  SpeedupEstimate e;
  e.samples = static_cast<int>(samples.size());
  std::vector<double> plain_means, ratios;
  double round_total = 0;
  for (const auto& s : samples) {
    TANDEM_CHECK(s.qualifies());
    plain_means.push_back(mean(s.plain_ms));
    ratios.push_back(s.speedup());
    round_total += s.round_ms;
    e.rounds += s.rounds;
    e.drafted += s.drafted;
    e.accepted += s.accepted;
  }
  std::sort(plain_means.begin(), plain_means.end());
  const size_t n = plain_means.size();
  e.classic_step_ms = n % 2 ? plain_means[n / 2] : (plain_means[n / 2 - 1] + plain_means[n / 2]) / 2;
  e.round_ms = round_total / static_cast<double>(e.rounds);
  e.accepted_len = static_cast<double>(e.accepted) / static_cast<double>(e.rounds);
  e.acceptance_rate = e.drafted > 0 ? static_cast<double>(e.accepted) / static_cast<double>(e.drafted) : 0.0;
  e.speedup = (e.accepted_len + 1.0) * e.classic_step_ms / e.round_ms;
  e.low = e.high = e.speedup;
  if (n >= 2) {
    std::vector<double> logs(ratios.size());
    std::transform(ratios.begin(), ratios.end(), logs.begin(), [](double r) { return std::log(r); });
    const double m = mean(logs);
    double ss = 0;
    for (double l : logs) ss += (l - m) * (l - m);
    e.log_stddev = std::sqrt(ss / static_cast<double>(n - 1));
    const double half =
        t_quantile_975(static_cast<int>(n) - 1) * e.log_stddev / std::sqrt(static_cast<double>(n));
    e.low = e.speedup * std::exp(-half);
    e.high = e.speedup * std::exp(half);
    e.has_interval = true;
  }
  return e;
}

std::optional<bool> VerdictRule::confident(const SpeedupEstimate& e) const {
  if (!e.has_interval) return std::nullopt;
  const bool at_low = verdict(e.low), at_high = verdict(e.high);
  if (at_low != at_high) return std::nullopt;
  return at_low;
}

std::string VerdictRule::zone(double speedup) const {
  if (speedup <= 1.0) return "<= 1.0: decline";
  if (speedup >= 1.5) return ">= 1.5: enable";
  return std::string("between 1.0 and 1.5: static default for this hardware (") +
         (static_default ? "enable" : "decline") + ")";
}

}  // namespace tandem::scheduler
