// BatchPlanner: the scheduler's request state machine, free of any model.
//
// Each tick the engine asks for a TickPlan, executes it, and reports back
// (on_prefilled / on_generated / finish). States:
//
//   queued --admit--> prefilling --last chunk--> decoding --finish--> (gone)
//      \__________________ cancel (any state) ___________________/
//
// Rules, in order, every tick:
// 1. Cancelled requests are dropped and their KV reservation released.
// 2. Admission is FIFO: the head of the queue is admitted while fewer than
//    max_running requests run and its worst-case KV (prompt + max_tokens, in
//    blocks) fits in the free blocks. A head that does not fit waits (and
//    blocks the queue: no starvation of big requests). Running requests are
//    never evicted. There is no speculative headroom: a speculative round
//    touches only positions classic decoding feeds too (the engine shrinks
//    its block near the end), so what classic decoding fits, speculation fits.
// 3. Every decoding request advances one token in one batched classic step —
//    except when exactly one request is decoding and speculation is
//    available: then it advances by one speculative round instead.
// 4. Prefilling requests get prompt chunks, in admission order, until the
//    tick's prefill token budget is spent — so decoding requests keep
//    streaming while long prompts are ingested.
//
// Not thread-safe: engine thread only. Deterministic: the same calls give
// the same plans (tests drive it tick by tick).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace tandem::scheduler {

enum class Phase { queued, prefilling, decoding, finished };
const char* phase_name(Phase phase);

struct PlannerConfig {
  int32_t max_running = 4;        // -np
  int64_t prefill_budget = 256;   // prompt tokens per tick
  int32_t tokens_per_block = 32;  // KV cache block size (positions per block)
  int32_t total_blocks = 0;       // KV pool capacity
};

struct PrefillChunk {
  uint64_t id = 0;
  int64_t start = 0;  // first prompt position of the chunk
  int64_t length = 0;
  bool last = false;  // completes the prompt: sample the first token from its last row
  bool operator==(const PrefillChunk&) const = default;
};

struct TickPlan {
  std::vector<uint64_t> dropped;   // cancelled this tick: release their KV
  std::vector<uint64_t> admitted;  // queued -> prefilling this tick
  std::vector<PrefillChunk> prefill;
  std::vector<uint64_t> decode;  // one classic token each, in one batched forward
  std::optional<uint64_t> speculative;
  bool idle() const { return dropped.empty() && prefill.empty() && decode.empty() && !speculative; }
};

class BatchPlanner {
 public:
  explicit BatchPlanner(PlannerConfig config);

  void enqueue(uint64_t id, int64_t prompt_tokens, int64_t max_tokens);
  // Marks a request cancelled; it is dropped at the next plan().
  void cancel(uint64_t id);
  TickPlan plan(bool speculation_available);
  // Called for each request as plan() admits it, before its prefill is
  // planned; returns how many leading prompt tokens are already in KV (a
  // prefix-cache hit, < the prompt), so prefill starts after them.
  void set_admit_hook(std::function<int64_t(uint64_t id)> hook) { admit_hook_ = std::move(hook); }

  // Engine feedback after executing a plan.
  void on_prefilled(uint64_t id, int64_t tokens);  // prompt tokens now in KV
  void finish(uint64_t id);                        // done (stop/length/error)

  // Worst-case blocks a request needs (what admission reserves).
  int32_t blocks_needed(int64_t prompt_tokens, int64_t max_tokens) const;
  bool fits_ever(int64_t prompt_tokens, int64_t max_tokens) const {
    return blocks_needed(prompt_tokens, max_tokens) <= config_.total_blocks;
  }

  std::optional<Phase> phase(uint64_t id) const;
  int32_t free_blocks() const { return free_blocks_; }
  int32_t reserved_blocks() const { return config_.total_blocks - free_blocks_; }
  int running() const { return static_cast<int>(running_.size()); }
  int queued() const { return static_cast<int>(queue_.size()); }
  int decoding() const;
  const PlannerConfig& config() const { return config_; }

 private:
  struct Slot {
    Phase phase = Phase::queued;
    int64_t prompt_tokens = 0;
    int64_t prefilled = 0;
    int64_t max_tokens = 0;
    int32_t reserved = 0;
    bool cancelled = false;
  };
  void drop(uint64_t id, TickPlan& plan);

  PlannerConfig config_;
  int32_t free_blocks_;
  std::map<uint64_t, Slot> slots_;
  std::deque<uint64_t> queue_;     // queued, FIFO
  std::vector<uint64_t> running_;  // admitted, in admission order
  std::function<int64_t(uint64_t)> admit_hook_;
};

}  // namespace tandem::scheduler
