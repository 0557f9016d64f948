// step_timing.h — where a device forward chunk's time goes, when
// TANDEM_STEP_TIMING=1 (internal to tandem_model; ADR 0047).
//
// Per chunk, host wall time in three phases: `upload` (build the row tables,
// copy them to the device), `enqueue` (one graph launch, or the eager
// launches of every kernel), `wait` (the device finishing the work, then the
// logits download). The GPU runs while the host enqueues, so a GPU-bound
// step shows small upload/enqueue and a wait close to the GPU time. Averages
// per (rows, graphed) are logged at info every kReportChunks chunks and when
// the forward goes. Off, each
// call is one branch. Not thread-safe (the engine thread's forward).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "core/log.h"

namespace tandem::model {

class StepTiming {
 public:
  enum Phase { upload, enqueue, wait, kPhases };
  static constexpr int64_t kReportChunks = 128;

  explicit StepTiming(const char* who) : who_(who) {
    const char* v = std::getenv("TANDEM_STEP_TIMING");
    on_ = v != nullptr && std::string(v) == "1";
  }
  void begin(int64_t rows, bool graphed) {
    if (!on_) return;
    key_ = rows * 2 + (graphed ? 1 : 0);
    last_ = Clock::now();
  }
  void mark(Phase p) {
    if (!on_) return;
    const auto now = Clock::now();
    buckets_[key_].ms[p] += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
  }
  void end() {
    if (!on_) return;
    mark(wait);
    buckets_[key_].chunks++;
    if (++chunks_ >= kReportChunks) report();
  }
  ~StepTiming() { report(); }  // what the last reporting period left

 private:
  void report() {
    for (const auto& [key, b] : buckets_) {
      if (b.chunks == 0) continue;  // a chunk that failed midway
      const double n = static_cast<double>(b.chunks);
      spdlog::info("{} timing: {} chunks of {} rows{}: upload {:.3f} ms, enqueue {:.3f} ms, wait {:.3f} ms",
                   who_, b.chunks, key / 2, key % 2 ? " (graph)" : "", b.ms[upload] / n, b.ms[enqueue] / n,
                   b.ms[wait] / n);
    }
    buckets_.clear();
    chunks_ = 0;
  }
  using Clock = std::chrono::steady_clock;
  struct Bucket {
    int64_t chunks = 0;
    double ms[kPhases] = {};
  };
  const char* who_;
  bool on_ = false;
  int64_t key_ = 0, chunks_ = 0;
  Clock::time_point last_;
  std::map<int64_t, Bucket> buckets_;
};

}  // namespace tandem::model
