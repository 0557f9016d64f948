// The exactness probe and gate (docs/spec-speculative.md §2).
//
// The probe measures, on the loaded model and the current kernel
// configuration, whether a K-token verify forward gives logits byte-identical
// to K consecutive single-token forwards. The gate memoizes the verdict per
// (K, model identity), retries with the invariant matmul kernel when a
// non-invariant one was only requested (not pinned with TANDEM_GEMM), applies
// allow_inexact (the app's TANDEM_MTP_ALLOW_INEXACT, passed in), stores a one-line decline reason and logs
// the INFO/WARN lines the spec prescribes.
//
// Thread-compatible: owned by the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace tandem::model {
class Model;
}

namespace tandem::speculative {

struct ProbeResult {
  bool ran = false;       // false: the probe could not run (why says why)
  bool exact = false;     // every compared row byte-identical
  int32_t position = -1;  // first differing block position
  size_t differing_bytes = 0;
  size_t total_bytes = 0;
  std::string why;  // when !ran
  // Set when the verdict is known without measuring (a kernel that is not
  // batch-invariant by construction): ran, not exact, and this is the reason.
  std::string declared;

  // The spec's reason string (no trailing period).
  std::string reason() const;
};

inline constexpr int kProbeDraws = 3;

// Runs the probe on `model` with matmul mode `gemm`, on a private KV cache
// (serving caches are untouched): kProbeDraws draws with an 8-token prompt
// plus one draw whose block crosses an attention chunk boundary. On a model
// placed on a CUDA device, splitk (cuBLAS) is declared inexact without
// measuring: cuBLAS promises no batch invariance, and whether one build picks
// the same algorithm for M = 1 and M = K on one machine says nothing about
// the next shape, driver or GPU.
ProbeResult run_exactness_probe(const model::Model& model, ThreadPool* pool, int block_size,
                                kernels::GemmMode gemm);

// The matmul mode the user asked for (--gemm / TANDEM_GEMM, parsed by the
// app) and whether TANDEM_GEMM pinned it: a pinned mode is never retried.
struct GemmRequest {
  kernels::GemmMode mode = kernels::GemmMode::invariant;
  bool pinned = false;
};

struct GateDecision {
  bool allowed = false;  // exact || allow_inexact
  bool exact = false;
  std::string probe_reason;                               // the final probe's reason()
  kernels::GemmMode gemm = kernels::GemmMode::invariant;  // the mode the final probe ran with
  std::optional<std::string> decline_reason;              // "{reason}.{also_tried}" trimmed, when !allowed
};

class ExactnessGate {
 public:
  using ProbeFn = std::function<ProbeResult(int block_size, kernels::GemmMode mode)>;
  // `model_identity` keys the memo (e.g. the target's path); `probe` runs
  // one probe with the given matmul mode; `allow_inexact`
  // (TANDEM_MTP_ALLOW_INEXACT, read by the app) engages speculation when the
  // probe finds the verify inexact; `gemm` is the requested mode: an inexact
  // non-invariant one that is not pinned is retried with the invariant mode.
  ExactnessGate(std::string model_identity, ProbeFn probe, bool allow_inexact, GemmRequest gemm = {});
  // The gate every front end uses: keyed by `model`'s directory, probing
  // `model` on `pool` (both must outlive the gate).
  static ExactnessGate for_model(const model::Model& model, ThreadPool* pool, bool allow_inexact,
                                 GemmRequest gemm = {});

  // Memoized: the probe (and the kernel retry) run at most once per K.
  const GateDecision& decide(int block_size);
  bool allowed(int block_size) { return decide(block_size).allowed; }
  int probe_runs() const { return probe_runs_; }
  // The mode the gate settled on: the requested one, or invariant once a
  // retry with it made the verify exact (the switch sticks for later K).
  // The caller runs its Forwards (target and drafter) with it.
  kernels::GemmMode gemm_mode() const { return gemm_.mode; }

 private:
  GateDecision evaluate(int block_size);

  std::string identity_;
  ProbeFn probe_;
  bool allow_inexact_ = false;
  GemmRequest gemm_;
  std::map<int, GateDecision> memo_;
  int probe_runs_ = 0;
};

}  // namespace tandem::speculative
