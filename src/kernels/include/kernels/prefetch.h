// kernels/prefetch.h — the CPU kernels' software prefetch policy (ADR 0049).
//
// Prefetch instructions only move data earlier; they never change which
// instructions compute an output, so every policy gives the same bits. The
// policy is tuning per CPU vendor: the defaults were measured with the
// interleaved kernel benchmarks (docs/benchmarks.md) on an Intel Sapphire
// Rapids VM and on AMD EPYC VMs (Zen 3, ADR 0049; Zen 4, ADR 0076).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/cpu_features.h"

namespace tandem::kernels {

// The most weight streams a lone row walks per thread (PrefetchPolicy::streams).
inline constexpr int kMaxRowStreams = 4;

struct PrefetchPolicy {
  // Dense (f32/bf16/f16) panel kernels, first pass over a panel: prefetch
  // this many bytes ahead into L1 (T0). 0 = none.
  int64_t near_bytes = 4096;
  // Dense kernels, single-pass streams of 2..4 rows (one panel at a time, a
  // range's last panel): this many bytes ahead into L2 (T1). 0 = none.
  int64_t far_bytes = 65536;
  // Dense kernels, a lone row (M = 1, 1..4 panels at once, `streams`): the
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
  // A lone row (M = 1, decode), dense and quantized kernels alike: how many
  // weight streams each thread walks side by side, 1..kMaxRowStreams (dense: whole panels
  // at once, simd/row_streams.h; quantized: contiguous runs of the thread's
  // groups). Never a bit of the result: every output keeps its own chain.
  int streams = 4;
  // The K block types (q4_k, q5_k, q6_k), a lone row: the weight streams of the
  // whole call, shared by its threads — each walks max(1, k_call_streams /
  // threads), at most kMaxRowStreams (ADR 0086). 0 = `streams` per thread.
  int k_call_streams = 0;
  // A lone row on several threads: 0 = each thread walks its static share of
  // the outputs; else the shares are worked in pieces of at least this many
  // weight bytes and a thread that finishes first takes pieces from the back
  // of the others' (ThreadPool::parallel_for_shared; ADR 0092). Never a bit.
  int64_t share_bytes = 0;
};

// The tuned default for a vendor and whether the CPU has the AVX-512 level
// (Intel and "other": the policy the kernels had before ADR 0049; AMD: ADRs
// 0049 and 0076).
PrefetchPolicy prefetch_policy_for(CpuVendor vendor, bool avx512 = false);
// What the kernels use: prefetch_policy_for(cpu_features().vendor, AVX-512
// level) unless set_prefetch_policy() replaced it (TANDEM_CPU_PREFETCH).
const PrefetchPolicy& prefetch_policy();
// Start-up only (before other threads run kernels), like select_isa(): the
// kernel benchmarks' --prefetch flag.
void set_prefetch_policy(const PrefetchPolicy& policy);
// The lone-row streams one thread of a `threads`-thread call walks (k_type: the
// weights are a K block type; k_call_streams then applies, else streams).
int row_streams(const PrefetchPolicy& policy, bool k_type, int threads);
// For a lone row whose work units (panels, group chunks) are `unit_bytes` of
// weights each: the fewest units of a shared-split piece, or 0 for the static
// split (share_bytes 0).
int64_t share_units(const PrefetchPolicy& policy, int64_t unit_bytes);
// "near=4096,far=65536,stream_far=65536,next=1,quant=2048,streams=4,kstreams=0,share=0" (any subset,
// applied on top of `base`); nullopt on an unknown key or a value that is not a non-negative
// integer (next: 0 or 1; streams: 1..4; kstreams: 0..16; share: bytes). TANDEM_CPU_PREFETCH takes the same
// text.
std::optional<PrefetchPolicy> parse_prefetch_policy(const std::string& text, PrefetchPolicy base);
std::string describe(const PrefetchPolicy& policy);  // the same format

}  // namespace tandem::kernels
