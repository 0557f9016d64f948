// Engine: the one thread that owns the models, the KV cache, the sampler,
// the drafter and the batch planner (docs/design.md "Threads").
//
// HTTP threads call submit() (thread-safe) with an EngineRequest and read
// the request's channel. The engine thread loops: take new requests, drop
// cancelled ones, ask the planner for a tick, run one batched forward for
// the tick's prefill chunks and classic decode steps, then — when exactly
// one request decodes and the exactness gate and policy allow — one
// speculative round for it. A round touches only positions classic decoding
// feeds too (its block shrinks near the end of the request's reservation or
// of the drafter's cache; where no draft fits it is a classic step), so
// speculation never fails a request that classic decoding serves. Every
// token a request receives is the seeded sampler's pick at its absolute
// position, so its output does not depend on what else runs (batch
// invariance) or on which path produced it.
//
// shutdown(): stop accepting, let in-flight requests finish within the drain
// time, cancel the rest, join. Errors inside a step fail only the requests
// involved, as values on their channels; nothing escapes the thread. A
// failed step is reported as Internal; InvalidArgument means the request's
// own constraints left no allowed token at its next position (the tokens
// before it were delivered; the error is the final update), on the classic
// and the speculative path alike.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "scheduler/batch_planner.h"
#include "scheduler/metrics.h"
#include "scheduler/policy.h"
#include "scheduler/policy_report.h"
#include "scheduler/prefix_cache.h"
#include "scheduler/request.h"
#include "speculative/drafter.h"
#include "speculative/exactness.h"
#include "speculative/sequence.h"

namespace tandem::scheduler {

struct EngineConfig;
// Rows per forward chunk: 256 on the CPU; on a GPU `forward_rows` when set, else one whole
// tick (prefill_budget + max_running) — both clamped to [256, 4096] (ADR 0051).
int64_t engine_forward_rows(const EngineConfig& config, bool on_gpu);

struct EngineConfig {
  int32_t max_running = 4;       // -np
  int64_t prefill_budget = 256;  // prompt tokens per tick
  // Rows per forward chunk when the target runs on a GPU (0: engine_forward_rows's
  // default; at most 4096). Chunking never changes a bit (ADR 0051).
  int64_t forward_rows = 0;
  int64_t context = 0;    // max prompt + completion tokens per request (0: model's max, capped at 4096)
  int64_t kv_tokens = 0;  // KV pool capacity (0: context * max_running)
  int32_t kv_tokens_per_block = 32;
  int threads = 0;          // kernel threads (0: hardware threads)
  int block_size = 4;       // speculative K (tokens per verify forward)
  std::string drafter_dir;  // for the policy key (canonicalised)
  bool prefix_cache =
      true;  // reuse cached prompt prefixes (off with an MTP drafter, which needs every hidden row)
  // From the app (the environment, read at the edge): the policy's variables,
  // the exactness gate's allow_inexact and the requested matmul mode (--gemm
  // / TANDEM_GEMM). The defaults read nothing: an adaptive policy without
  // hint files, an inexact verify declined, the invariant kernel. The
  // target's and the drafter's forwards run with the mode the gate settles on.
  PolicyEnv policy_env;
  bool allow_inexact = false;
  speculative::GemmRequest gemm;
};

class Engine {
 public:
  // `pool` (optional) is the kernel thread pool the drafter was loaded with;
  // the engine takes it over. Without one the engine makes its own.
  static Expected<std::unique_ptr<Engine>> create(const EngineConfig& config,
                                                  std::unique_ptr<model::Model> target,
                                                  std::unique_ptr<speculative::Drafter> drafter,
                                                  std::unique_ptr<ThreadPool> pool = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Replaces config().policy_env's policy; call before start().
  void set_policy_env(const PolicyEnv& env);
  void start();
  // Thread-safe. Rejects (without enqueuing) a request that can never fit
  // or arrives after shutdown began.
  Status submit(std::shared_ptr<EngineRequest> request);
  void shutdown(std::chrono::milliseconds drain);

  const EngineMetrics& metrics() const { return metrics_; }
  const model::Model& target() const { return *target_; }
  // The device the target (and the drafter) runs on, described once at create().
  const model::DeviceInfo& device() const { return device_; }
  const EngineConfig& config() const { return config_; }
  int64_t context() const { return config_.context; }
  bool has_drafter() const { return drafter_ != nullptr; }
  speculative::Drafter* drafter() { return drafter_.get(); }
  // Exactness gate for the configured block size (memoized; warmed at create()).
  speculative::ExactnessGate& gate() { return *gate_; }
  ThreadPool& pool() { return *pool_; }
  // What GET /v1/internal/mtp-policy shows; safe from any thread.
  const PolicyBoard& policy_board() const { return board_; }

 private:
  struct Active {
    std::shared_ptr<EngineRequest> req;
    speculative::SequenceState seq;
    std::vector<GeneratedToken> details;  // per generated token, when logprobs are wanted
    size_t sent = 0;
    std::chrono::steady_clock::time_point admitted, first_token, last_token;
    RequestStats stats;
    bool finished = false;
    bool admitted_yet = false;  // the planner admitted it
    bool waited = false;        // a plan ran that did not admit it (it queued for capacity)
    Status dead_end;            // not OK: its next position allows no token (sampling/dead_end.h)
  };

  Engine() = default;
  void loop();
  bool take_incoming(bool block);
  void run_tick(const TickPlan& plan);
  // After each plan: a request it did not admit has waited (its queue time counts).
  void mark_waiting(const TickPlan& plan);
  // The planner's admit hook: creates the request's KV sequence on its cached
  // prefix; returns the prompt tokens that need no prefill.
  int64_t admit(uint64_t id);
  // One batched forward + sampling + delivery; returns the ms of the first two.
  // chain: queue the next step of the same sequences ahead on a GPU (ADR 0090).
  double run_batched(const TickPlan& plan, bool chain = false);
  // Whether a decode-only tick should queue its next step ahead: nothing known
  // to change the next tick (a request waiting for admission, speculation, a
  // request whose max_tokens ends it with this step's token).
  bool chain_ahead(const TickPlan& plan);
  void run_speculative(uint64_t id);
  void sample_into(sampling::Sampler& sampler, Active& a, const model::ForwardOutput& out, int64_t row,
                   int64_t position);
  void deliver(Active& a);
  // deliver(), then, when its next position allows no token, finish(error) with the reason.
  void deliver_or_end(uint64_t id);
  // failure: an error finish counts in requests_failed (a dead end of the request's own
  // constraints does not: deliver_or_end counts it apart).
  void finish(uint64_t id, FinishReason reason, Status error = Status::Ok(), bool failure = true);
  bool speculation_available();
  void publish_gauges();
  void publish_policy();
  // TANDEM_STEP_TIMING=1 (ADR 0047): where a batched tick's host time goes.
  struct TickTiming {
    struct Sums {
      int64_t ticks = 0;
      double between_ms = 0, forward_ms = 0, sample_ms = 0, deliver_ms = 0;
    };
    bool on = false;
    int64_t ticks = 0;
    std::map<int64_t, Sums> by_rows;  // per forward row count
    std::chrono::steady_clock::time_point last_end;
  };
  void record_tick(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point forward,
                   std::chrono::steady_clock::time_point sampled, int64_t rows);
  void report_ticks();

  EngineConfig config_;
  std::unique_ptr<model::Model> target_;
  std::unique_ptr<speculative::Drafter> drafter_;
  std::unique_ptr<ThreadPool> pool_;
  model::KvCache kv_;
  std::unique_ptr<model::Forward> forward_;
  std::unique_ptr<speculative::ExactnessGate> gate_;
  std::unique_ptr<BatchPlanner> planner_;
  std::unique_ptr<PrefixCache> prefix_;      // null: prefix caching off
  std::vector<sampling::Sampler> samplers_;  // one per pool thread; [0] also serves the speculative slot
  std::optional<AdaptivePolicy> policy_;     // none: no drafter, or adaptation disabled without a pin
  model::DeviceInfo device_;
  std::string hardware_;
  PolicyBoard board_;
  std::map<uint64_t, Active> active_;
  uint64_t drafter_following_ = 0;  // request id the drafter's cache follows (0: none)
  EngineMetrics metrics_;
  TickTiming tick_timing_;

  std::mutex mu_;  // guards incoming_, stopping_
  std::condition_variable cv_;
  std::vector<std::shared_ptr<EngineRequest>> incoming_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point drain_deadline_;
  std::thread thread_;
};

}  // namespace tandem::scheduler
