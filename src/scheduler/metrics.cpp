#include "scheduler/metrics.h"

#include <algorithm>

namespace tandem::scheduler {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[i];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s;
  s.upper_bounds = bounds_;
  uint64_t running = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(running += c);
  s.sum = sum_;
  s.count = count_;
  return s;
}

EngineMetrics::EngineMetrics()
    : ttft_seconds({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                    10.0, 20.0, 40.0, 80.0}),
      inter_token_seconds({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                           0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5}),
      // vLLM's request-latency buckets (from 0.3 s), with finer ones below for a small model.
      e2e_request_latency_seconds({0.01, 0.05, 0.1,   0.3,   0.5,   0.8,   1.0,    1.5,
                                   2.0,  2.5,  5.0,   10.0,  15.0,  20.0,  30.0,   40.0,
                                   50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}),
      request_queue_time_seconds({0.0,  0.001, 0.005, 0.01,  0.05,  0.1,   0.3,   0.5,    0.8,
                                  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,  15.0,  20.0,   30.0,
                                  40.0, 50.0,  60.0,  120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {}

}  // namespace tandem::scheduler
