// Hint files: the adaptive policy's persisted verdicts (docs/spec-speculative.md
// §4, hint version 2 of docs/adr/0005-policy-confidence.md).
//
// A hint is a JSON object {version, kernel_version, target, drafter,
// hardware, block_size, verdict, acceptance_rate, samples, speedup,
// speedup_log_stddev, speedup_low, speedup_high, settle_reason}. parse_hint()
// validates every field — presence, type, range, the key, the kernel version
// and that the verdict is the one its own numbers imply — and says what is
// wrong as an InvalidArgument; the caller WARNs and profiles again.
//
// write_file_atomically() is what makes a hint never partial: the text goes
// to a temporary file in the same directory, is fsync'ed, renamed over the
// target and the directory fsync'ed. A process killed at any moment leaves
// the old file, the new file or (before the first one) none, plus perhaps a
// stale temporary file, which remove_stale_temp_files() deletes. Thread-
// compatible; errors are Status values, never aborts.
#pragma once

#include <string>

#include "core/status.h"
#include "scheduler/policy_estimate.h"

namespace tandem::scheduler {

struct PolicyKey;

inline constexpr int kHintVersion = 2;  // bump whenever the meaning of a stored verdict changes

// No B=1 speculative round can plausibly beat classic decode by more.
inline constexpr double kHintMaxSpeedup = 64.0;
// A spread of e^4 (55x) between requests is no measurement either.
inline constexpr double kHintMaxLogStddev = 4.0;

struct Hint {
  int kernel_version = 0;
  bool verdict = false;
  double acceptance_rate = 0;  // 0..1, stored with 2 decimals
  int samples = 0;
  double speedup = 0, speedup_log_stddev = 0, speedup_low = 0, speedup_high = 0;
  std::string settle_reason;  // "interval_cleared" | "max_samples"
};

std::string hint_json(const PolicyKey& key, const Hint& hint);

// `rule` is the verdict rule of the key's hardware; `kernel_version` the one
// this process runs.
Expected<Hint> parse_hint(const std::string& text, const PolicyKey& key, int kernel_version,
                          const VerdictRule& rule);

Status write_file_atomically(const std::string& path, const std::string& text);

// Deletes `path`.tmp.<pid> files whose writer process is gone; returns how many.
int remove_stale_temp_files(const std::string& path);

}  // namespace tandem::scheduler
