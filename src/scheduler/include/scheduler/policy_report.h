// PolicyReport: the speculation policy as GET /v1/internal/mtp-policy shows
// it (docs/spec-speculative.md §5, schema_version 1), and PolicyBoard, the
// thread-safe holder the engine publishes it into and HTTP threads read.
// Until the engine publishes, the board reports unavailable/worker_not_ready.
#pragma once

#include <mutex>
#include <optional>
#include <string>

namespace tandem::scheduler {

struct PolicyReport {
  std::string state = "unavailable";  // profiling|settled|forced|exactness_declined|unavailable
  std::optional<std::string> reason = std::string("worker_not_ready");  // unavailable only
  std::optional<std::string> decline_detail;                            // exactness_declined only
  std::optional<std::string> verdict;                                   // settled: enable|decline
  std::optional<bool> mtp_enabled;                                      // null only while worker_not_ready
  std::optional<std::string> draft_kind;
  std::optional<std::string> target, drafter, hardware;  // the key fields
  std::optional<int> block_size;
  std::optional<double> acceptance_rate;
  int samples = 0;
  std::optional<int> samples_remaining;
  std::optional<double> last_speedup;  // the settle estimate (metrics only)
  // Additive fields of docs/adr/0005-policy-confidence.md (profiling/settled only).
  std::optional<double> speedup, speedup_log_stddev, speedup_low, speedup_high, speedup_threshold;
  std::optional<std::string> settle_reason;     // interval_cleared | max_samples
  std::optional<std::string> verdict_source;    // measured | hint
  std::optional<std::string> reprofile_reason;  // why the policy last (re-)profiled, if it did
  int reprofiles = 0;
  std::optional<double> served_speedup;
  int contradicting_windows = 0;
};

class PolicyBoard {
 public:
  void publish(const PolicyReport& report) {
    std::lock_guard<std::mutex> lock(mu_);
    report_ = report;
  }
  PolicyReport read() const {
    std::lock_guard<std::mutex> lock(mu_);
    return report_;
  }

 private:
  mutable std::mutex mu_;
  PolicyReport report_;
};

}  // namespace tandem::scheduler
