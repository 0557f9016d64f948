// Engine requests and the channel that carries their results back.
//
// An HTTP worker builds an EngineRequest (token ids, sampling parameters,
// limits) and submits it; the engine thread pushes RequestUpdates (new
// tokens with optional logprobs, then exactly one final update carrying the
// finish reason and statistics) into the request's channel. The HTTP worker
// sets `cancelled` when its client goes away; the engine frees the request's
// KV at its next step. The channel is the only state both threads touch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/status.h"
#include "sampling/params.h"
#include "sampling/sampler.h"

namespace tandem::scheduler {

enum class FinishReason { none, stop, length, cancelled, error };
const char* finish_reason_name(FinishReason reason);

struct GeneratedToken {
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<sampling::TokenLogprob> top;
};

struct RequestStats {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // leading prompt tokens reused from the prefix cache
  int64_t generated_tokens = 0;
  double queue_ms = 0;   // submit -> admitted
  double prompt_ms = 0;  // admitted -> first token
  double decode_ms = 0;  // first token -> finish
  int64_t spec_rounds = 0;
  int64_t draft_tokens = 0;     // drafts proposed
  int64_t accepted_tokens = 0;  // drafts accepted
};

struct RequestUpdate {
  std::vector<GeneratedToken> tokens;
  FinishReason finish = FinishReason::none;  // != none: the last update
  Status error;                              // when finish == error
  RequestStats stats;                        // filled on the last update
};

class RequestChannel {
 public:
  void push(RequestUpdate update);
  // Moves every queued update into `out`; waits up to `timeout` when none is
  // queued. Returns false on timeout with nothing queued.
  bool pop_all(std::vector<RequestUpdate>& out, std::chrono::milliseconds timeout);
  void cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestUpdate> queue_;
  std::atomic<bool> cancelled_{false};
};

struct EngineRequest {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  sampling::SamplingParams params;
  int32_t max_tokens = 0;            // > 0
  std::vector<int32_t> stop_tokens;  // e.g. EOS ids: finish "stop" when sampled (not emitted)
  bool want_logprobs = false;
  std::shared_ptr<RequestChannel> channel = std::make_shared<RequestChannel>();
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
};

}  // namespace tandem::scheduler
