// The adaptive speculation policy (docs/spec-speculative.md §4, with the
// confidence rule and served-speedup monitoring of
// docs/adr/0005-policy-confidence.md).
//
// States: forced(pin), profiling, settled{verdict, acceptance_rate, samples}.
// - TANDEM_ENABLE_MTP_B1 set: forced (off values pin off, on values pin on).
// - else TANDEM_MTP_ADAPTIVE off: no policy (a static default decides; the
//   engine reports `adaptive_disabled`).
// - else a valid persisted hint for the key: settled; otherwise profiling.
// A flag that is set but not a boolean is an error (PolicyEnv::parse) the
// app reports at start-up. The scheduler reads no environment: the app
// parses the process's into a PolicyEnv and passes it in (EngineConfig).
// should_run(): forced -> pin; profiling -> true; settled -> verdict (or
// true while a decline's spot check is due, below).
//
// Profiling: after kWarmupRounds speculative rounds, the next
// kPlainStepsPerRequest rounds of each profiled request run as timed plain
// single-token steps (their output is real; the time is the forward and the
// pick, as a round's is); a request with both is a qualifying sample. From
// kSamplesRequired samples on, the policy estimates (policy_estimate.h)
//   speedup = (accepted_len + 1) * classic_step_ms / round_ms
// with a 95% interval from the spread of the per-request speedups, and
// settles once the interval lies on one side of the verdict threshold (1.0
// where the hardware's static default enables, else 1.5) — reason
// `interval_cleared` — or at kSamplesMax by the point estimate — reason
// `max_samples`. The verdict is persisted (policy_hint.h) and logged with
// every input.
//
// Settled, the policy keeps measuring: every request of an `enable` and
// every kDeclineCheckEvery-th finished request of a `decline` (a spot check)
// is sampled the same way. Each kMonitorWindow such samples form a window;
// kContradictingWindows consecutive windows whose interval lies on the other
// side of the threshold mean a re-profile from scratch (the hint is deleted
// and rewritten when the policy settles again).
//
// Timings are injected: the engine measures and passes milliseconds in; the
// policy reads no clock. Owned by the engine thread; snapshot() copies are
// what HTTP threads see.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/version.h"
#include "model/device.h"
#include "scheduler/policy_estimate.h"
#include "scheduler/policy_hint.h"

namespace tandem::scheduler {

struct PolicyReport;

inline constexpr int kPlainStepsPerRequest = 2;
// Speculative rounds a profiled request runs before its plain steps, so that
// both are timed in the same (warm) state — see docs/adr/0003.
inline constexpr int kWarmupRounds = 2;
// Served-speedup monitoring of a settled verdict (ADR 0005).
inline constexpr int kMonitorWindow = 4;
inline constexpr int kContradictingWindows = 2;
inline constexpr int kDeclineCheckEvery = 8;

enum class PolicyState { forced, profiling, settled };
const char* policy_state_name(PolicyState state);

struct PolicyKey {
  std::string target;   // canonical target directory
  std::string drafter;  // canonical drafter directory
  std::string hardware;
  int block_size = 0;
  std::string text() const;  // "target|drafter|hardware|K{K}"
};

// What the environment says about the policy: filled by the app (through
// parse()), passed in with EngineConfig; tests build their own.
struct PolicyEnv {
  std::optional<bool> adaptive;                  // TANDEM_MTP_ADAPTIVE (nullopt: unset = on)
  std::optional<bool> force;                     // TANDEM_ENABLE_MTP_B1 (nullopt: unset)
  std::string cache_dir;                         // ${TANDEM_CACHE_DIR:-$HOME/.cache/tandem}
  int kernel_version = kernels::kKernelVersion;  // hints measured with another are re-profiled

  using Lookup = std::function<std::optional<std::string>(const char*)>;
  // Reads the variables through `lookup`. A flag that is set but not
  // 1/true/yes/on/0/false/no/off (trimmed, any case) is an InvalidArgument
  // naming the variable and its value.
  static Expected<PolicyEnv> parse(const Lookup& lookup);
};

// The static verdict for a hardware class when nothing was measured (or the
// measurement landed between the thresholds). CPUs and CUDA GPUs ("cpu:",
// "cuda:" labels): enable — B=1 decode is bandwidth-bound and a K-row verify
// streams the weights once (ADR 0030). Anything else: decline.
bool static_default_for(const std::string& hardware);

struct PolicySnapshot {
  PolicyState state = PolicyState::profiling;
  std::optional<bool> verdict;            // settled only
  bool mtp_enabled = false;               // should_run()
  std::optional<double> acceptance_rate;  // profiling: running value; settled: 2 decimals
  int samples = 0;
  std::optional<double> last_speedup;  // the settle estimate, when one was made
  // The estimate behind the verdict (settled) or the running one (profiling,
  // from 2 samples on): point, spread and 95% interval.
  std::optional<double> speedup, speedup_log_stddev, speedup_low, speedup_high;
  std::optional<double> threshold;              // profiling and settled
  std::optional<std::string> settle_reason;     // settled: interval_cleared | max_samples
  std::optional<std::string> verdict_source;    // settled: measured | hint
  std::optional<std::string> reprofile_reason;  // why the last (re-)profile started, if not a fresh key
  int reprofiles = 0;                           // served-speedup re-profiles in this process
  std::optional<double> served_speedup;         // settled: the last monitoring window's estimate
  int contradicting_windows = 0;                // settled: consecutive windows against the verdict
};

class AdaptivePolicy {
 public:
  // nullopt when the environment disables adaptation without a pin (the
  // caller then uses static_default_for()).
  static std::optional<AdaptivePolicy> create(const PolicyKey& key, const PolicyEnv& env);

  bool should_run() const;
  PolicyState state() const { return state_; }
  PolicySnapshot snapshot() const;
  const PolicyKey& key() const { return key_; }
  // Where the hint lives ("" when no cache directory is known).
  const std::string& hint_path() const { return hint_path_; }

  // Sampling protocol, driven by the engine for the request in the B=1 slot
  // (profiling, and monitoring while settled). True while `request` should
  // still take a timed plain step instead of a round.
  bool wants_plain_step(uint64_t request) const;
  void record_plain_step(uint64_t request, double ms);
  void record_round(uint64_t request, double round_ms, int32_t drafted, int32_t accepted);
  // The request left (finished or cancelled): counts as a sample if it
  // qualifies. Call it for every request (decline spot checks count them).
  void request_finished(uint64_t request);

 private:
  AdaptivePolicy() = default;
  void load_hint();
  void settle(const SpeedupEstimate& e, const char* reason);
  void monitor(PolicySample sample);
  void reprofile(const std::string& why);
  void write_hint() const;
  bool sampling() const;  // whether rounds and plain steps are being recorded

  PolicyKey key_;
  PolicyEnv env_;
  VerdictRule rule_;
  std::string hint_path_;
  PolicyState state_ = PolicyState::profiling;
  bool forced_on_ = false;
  bool verdict_ = false;
  double acceptance_rate_ = 0;
  int samples_ = 0;
  std::optional<SpeedupEstimate> settled_estimate_;  // the verdict's, measured or from the hint
  std::string settle_reason_, verdict_source_, reprofile_reason_;
  int reprofiles_ = 0;
  std::optional<double> last_speedup_;
  std::map<uint64_t, PolicySample> open_;  // sampled requests in flight
  std::vector<PolicySample> done_;         // qualifying samples (profiling)
  std::vector<PolicySample> window_;       // the monitoring window being filled (settled)
  std::optional<double> served_speedup_;
  int contradicting_windows_ = 0;
  int finished_since_check_ = 0;  // decline: finished requests since the last spot check
  bool check_due_ = false;        // decline: the next B=1 request is a spot check
};

// Fills the report's policy fields (state, verdict, samples, the estimate,
// the reasons) from a snapshot; the key fields are the caller's.
void describe_policy(const PolicySnapshot& s, PolicyReport& r);

// A label that separates machines whose verdicts may differ: CPU model,
// thread count and kernel ISA level, e.g. "cpu:Intel(R) Xeon(R) Processor|t2|avx512", and
// "|x bf16" under bf16 activations (ADR 0082).
std::string hardware_label(int threads);
// The label of the device the target runs on: hardware_label(threads) for
// the CPU; for a GPU its model, SM version, multiprocessor count and driver,
// e.g. "cuda:NVIDIA H200|sm_90|132sm|driver 580.159.04" — never one shared
// with a CPU, so a CPU verdict and a GPU verdict never merge (ADR 0030). The
// device's index is not in it: two identical GPUs share verdicts.
std::string hardware_label(const model::DeviceInfo& device, int threads);

}  // namespace tandem::scheduler
