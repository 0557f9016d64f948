// kernels/prefetch.h — the CPU kernels' software prefetch policy (ADR 0049).
//
// Prefetch instructions only move data earlier; they never change which
// instructions compute an output, so every policy gives the same bits. The
// policy is tuning per CPU vendor: the defaults were measured with the
// interleaved kernel benchmarks (docs/benchmarks.md) on an Intel Sapphire
// Rapids VM and on an AMD EPYC (Zen 5) VM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/cpu_features.h"

namespace tandem::kernels {

struct PrefetchPolicy {
  // Dense (f32/bf16/f16) panel kernels, first pass over a panel: prefetch
  // this many bytes ahead into L1 (T0). 0 = none.
  int64_t near_bytes = 4096;
  // Dense kernels, single-pass streams (M <= 4 one panel at a time, a
  // range's last panel): this many bytes ahead into L2 (T1). 0 = none.
  int64_t far_bytes = 65536;
  // Dense kernels, the M = 1 multi-stream path (2-4 panels at once): the
  // same T1 prefetch on each stream. 0 = none.
  int64_t stream_far_bytes = 65536;
  // Dense kernels with several passes over a panel (M > 4 on AVX-512):
  // every pass prefetches an equal share of the next panel into L2. AVX2,
  // M > 1 (K chunks, ADR 0050): every tile of a chunk prefetches a share of
  // the next chunk into L1.
  bool next_panel = true;
  // Quantized kernels: this many bytes ahead down each group's stream into
  // L1 (T0). 0 = none.
  int64_t quant_bytes = 2048;
};

// The tuned default for a vendor (Intel and "other": the policy the kernels
// had before ADR 0049).
PrefetchPolicy prefetch_policy_for(CpuVendor vendor);
// What the kernels use: prefetch_policy_for(cpu_features().vendor) unless
// set_prefetch_policy() replaced it.
const PrefetchPolicy& prefetch_policy();
// Start-up only (before other threads run kernels), like select_isa(): the
// kernel benchmarks' --prefetch flag.
void set_prefetch_policy(const PrefetchPolicy& policy);
// "near=4096,far=65536,stream_far=65536,next=1,quant=2048" (any subset, applied on top of
// `base`); nullopt on an unknown key or a value that is not a non-negative
// integer (next: 0 or 1).
std::optional<PrefetchPolicy> parse_prefetch_policy(const std::string& text, PrefetchPolicy base);
std::string describe(const PrefetchPolicy& policy);  // the same format

}  // namespace tandem::kernels
