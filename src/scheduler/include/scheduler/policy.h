// The adaptive speculation policy (SPEC-speculative.md §4).
//
// States: forced(pin), profiling, settled{verdict, acceptance_rate, samples}.
// - TANDEM_ENABLE_MTP_B1 set: forced (off values pin off, anything else on).
// - else TANDEM_MTP_ADAPTIVE off: no policy (a static default decides; the
//   engine reports `adaptive_disabled`).
// - else a valid persisted hint for the key: settled; otherwise profiling.
// should_run(): forced -> pin; profiling -> true; settled -> verdict.
//
// Profiling: after kWarmupRounds speculative rounds, the next
// kPlainStepsPerRequest rounds of each profiled request run as timed plain
// single-token steps (their output is real; the time is the forward and the
// pick, as a round's is); a request with both is a qualifying sample. After
// kSamplesRequired samples the policy estimates
//   speedup = (accepted_len + 1) * classic_step_ms / round_ms
// (classic_step_ms = median of per-request plain-step means, round_ms = mean
// draft+verify+overhead per round, accepted_len = accepted / rounds) and
// settles: <= 1.0 decline, >= 1.5 enable, between: the hardware's static
// default. The verdict is persisted (hint files, below) and logged with
// every input.
//
// Hints: ${TANDEM_CACHE_DIR:-$HOME/.cache/tandem}/mtp-policy/<16 hex of
// sha256(key)>.json, key "target|drafter|hardware|K{K}", written to a temp
// file and renamed. Anything wrong with a hint (unreadable, malformed, wrong
// version, other key) means WARN and re-profile; an unwritable directory
// means WARN and a policy that lives in memory only.
//
// Owned by the engine thread; snapshot() copies are what HTTP threads see.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tandem::scheduler {

inline constexpr int kSamplesRequired = 4;
inline constexpr int kPlainStepsPerRequest = 2;
// Speculative rounds a profiled request runs before its plain steps, so that
// both are timed in the same (warm) state — see docs/adr/0003.
inline constexpr int kWarmupRounds = 2;
// Bump whenever the meaning of a stored verdict changes.
inline constexpr int kHintVersion = 1;

enum class PolicyState { forced, profiling, settled };
const char* policy_state_name(PolicyState state);

struct PolicyKey {
  std::string target;   // canonical target directory
  std::string drafter;  // canonical drafter directory
  std::string hardware;
  int block_size = 0;
  std::string text() const;  // "target|drafter|hardware|K{K}"
};

// What the environment says, read once per process (tests build their own).
struct PolicyEnv {
  std::optional<bool> adaptive;  // TANDEM_MTP_ADAPTIVE (nullopt: unset = on)
  std::optional<bool> force;     // TANDEM_ENABLE_MTP_B1 (nullopt: unset)
  std::string cache_dir;         // ${TANDEM_CACHE_DIR:-$HOME/.cache/tandem}
  static PolicyEnv from_process();
};

// The static verdict for a hardware class when nothing was measured (or the
// measurement landed between the thresholds). CPUs: enable — B=1 decode is
// bandwidth-bound and a K-row verify streams the weights once.
bool static_default_for(const std::string& hardware);

struct PolicySnapshot {
  PolicyState state = PolicyState::profiling;
  std::optional<bool> verdict;            // settled only
  bool mtp_enabled = false;               // should_run()
  std::optional<double> acceptance_rate;  // profiling: running value; settled: 2 decimals
  int samples = 0;
  std::optional<double> last_speedup;  // the settle estimate, when one was made
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

  // Profiling protocol, driven by the engine for the request in the B=1 slot.
  // True while `request` should still take a timed plain step instead of a round.
  bool wants_plain_step(uint64_t request) const;
  void record_plain_step(uint64_t request, double ms);
  void record_round(uint64_t request, double round_ms, int32_t drafted, int32_t accepted);
  // The request left (finished or cancelled): counts as a sample if it ran a round.
  void request_finished(uint64_t request);

 private:
  struct Sample {
    std::vector<double> plain_ms;
    int rounds = 0;
    double round_ms = 0;
    int64_t drafted = 0, accepted = 0;
  };
  AdaptivePolicy() = default;
  void load_hint();
  void settle();
  void write_hint() const;

  PolicyKey key_;
  PolicyEnv env_;
  std::string hint_path_;
  PolicyState state_ = PolicyState::profiling;
  bool forced_on_ = false;
  bool verdict_ = false;
  double acceptance_rate_ = 0;
  int samples_ = 0;
  std::optional<double> last_speedup_;
  std::map<uint64_t, Sample> open_;  // profiled requests in flight
  std::vector<Sample> done_;         // qualifying samples
};

// A label that separates machines whose verdicts may differ: CPU model,
// thread count and kernel ISA level, e.g. "cpu:Intel(R) Xeon(R) Processor|t2|avx512".
std::string hardware_label(int threads);

}  // namespace tandem::scheduler
