// EngineMetrics: counters and histograms the engine updates and HTTP threads
// read for GET /metrics. Counters are atomics; histograms take a small
// mutex. All methods are thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tandem::scheduler {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (non-cumulative) + overflow
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The block size K (tokens per verify forward) tandem accepts, from
// --draft-block-size, TANDEM_DRAFT_BLOCK_SIZE or the drafter's config.json:
// kMinDraftBlockSize..kMaxDraftBlockSize.
inline constexpr int kMinDraftBlockSize = 2;
inline constexpr int kMaxDraftBlockSize = 16;
// Per-position acceptance counters: a round accepts fewer than K drafts.
inline constexpr int kMaxSpecPositions = kMaxDraftBlockSize;

struct EngineMetrics {
  EngineMetrics();

  std::atomic<uint64_t> requests_total{0};
  std::atomic<uint64_t> requests_finished_stop{0};
  std::atomic<uint64_t> requests_finished_length{0};
  std::atomic<uint64_t> requests_cancelled{0};
  std::atomic<uint64_t> requests_failed{0};
  // Ended where the request's own constraints (grammar, logit_bias, penalties) left no token:
  // the client's 400 no_allowed_token, not an engine failure. A model row with no finite logit
  // is the server's fault and counts in requests_failed.
  std::atomic<uint64_t> requests_no_allowed_token{0};
  std::atomic<uint64_t> prompt_tokens_total{0};
  std::atomic<uint64_t> generation_tokens_total{0};
  std::atomic<int64_t> running{0};
  std::atomic<int64_t> queued{0};
  std::atomic<int64_t> kv_blocks_used{0};
  std::atomic<int64_t> kv_blocks_total{0};
  std::atomic<uint64_t> prefix_cache_queries{0};  // prompt tokens looked up
  std::atomic<uint64_t> prefix_cache_hits{0};     // of them, found in the prefix cache
  std::atomic<int64_t> prefix_cache_blocks{0};    // blocks the prefix cache holds
  // Speculative decoding, with vLLM's / llama.cpp's names.
  std::atomic<uint64_t> spec_drafts{0};  // rounds
  std::atomic<uint64_t> spec_draft_tokens{0};
  std::atomic<uint64_t> spec_accepted_tokens{0};
  std::array<std::atomic<uint64_t>, kMaxSpecPositions> spec_accepted_per_pos{};

  // tandem never preempts a running request (admission reserves a request's
  // KV blocks up front and queues what does not fit), so this stays 0; it is
  // exported under vLLM's name so dashboards that plot it keep working.
  std::atomic<uint64_t> preemptions{0};

  Histogram ttft_seconds;
  Histogram inter_token_seconds;
  // Arrival to finish (every finish reason but an engine failure).
  Histogram e2e_request_latency_seconds;
  // Arrival to admission for a request that had to wait for a free sequence
  // or KV blocks; exactly 0 for one admitted by the first plan after it
  // arrived (so `count - bucket{le="0"}` counts the requests that queued).
  Histogram request_queue_time_seconds;
};

}  // namespace tandem::scheduler
