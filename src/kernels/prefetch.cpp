// prefetch.cpp — the software prefetch policy per CPU vendor (ADR 0049).
#include "kernels/prefetch.h"

#include <algorithm>
#include <sstream>

#include "core/env.h"

namespace tandem::kernels {
namespace {

PrefetchPolicy& active() {
  static PrefetchPolicy policy =
      prefetch_policy_for(cpu_features().vendor, cpu_features().has_avx512_level());
  return policy;
}

}  // namespace

PrefetchPolicy prefetch_policy_for(CpuVendor vendor, bool avx512) {
  PrefetchPolicy p;  // Intel (and unknown vendors): the defaults
  if (vendor == CpuVendor::amd) {
    // Measured on an AMD EPYC (Zen 3, AVX2) VM, docs/benchmarks.md "AMD Zen":
    // the T1 prefetch 64 KiB ahead cost the M = 1 multi-stream
    // path a third of its speed (0.29-0.32 vs 0.40-0.49 of the four-stream read,
    // thread CPU time); the quantized kernels ran best with a short
    // distance (512 B: 0.25-0.41 vs 0.24-0.32 at 2 KiB). next_panel stays:
    // without it M = 4 took 2.6-2.8x the M = 1 time instead of 1.1-1.5x.
    // The far prefetch of the other dense paths stays: without it M = 16
    // ran 11% slower (6 of 8 pairs).
    p.stream_far_bytes = 0;
    p.quant_bytes = 512;
    // AVX-512 parts (Zen 4 on): one weight stream per lone row (ADR 0076).
    // Measured on an AMD EPYC Zen 4 VM, docs/benchmarks.md "One weight stream
    // per thread on Zen 4": a core reads one plain stream at 27-28 GB/s and
    // four at ~20, and the 0.5B shape's Q8_0 / Q4_K_M decode ran 1.2-1.4x
    // faster on one stream than on four (1 thread), bf16 +3-11%. Zen 3 (AVX2
    // only) keeps four: there one stream was the limit (ADR 0049).
    // With one stream the quantized kernels' L1 prefetch runs 256 B ahead:
    // 1B Q8_0 decode 19.3-19.5 tok/s against 17.7-18.4 at 512 and 14.8-15.0
    // at 1024 (1 thread, same VM and ADR).
    if (avx512) {
      p.streams = 1;
      p.quant_bytes = 256;
      // Two streams for a one-thread call on the K types, one a thread
      // otherwise (ADR 0086, same VM, 1 thread, four alternated pairs each:
      // 1B Q4_K_M decode +10 / +14%, 0.5B Q4_K_M +10 / +5%; two streams on each
      // of 2 threads lost 25% on the 1B, and Q8_0 on one thread lost 14%).
      p.k_call_streams = 2;
      // A lone row's thread shares in pieces of >= 64 KiB, the idle thread
      // taking the tail of a busy one's (ADR 0092; same VM, 2 threads: the
      // calling thread's wait at the join fell from 3.7% to 1.4% of a decode
      // step, mean of six alternated pairs; tok/s +2-3% on the median, inside
      // this VM's swings).
      p.share_bytes = 65536;
    }
  }
  return p;
}

const PrefetchPolicy& prefetch_policy() { return active(); }

int64_t share_units(const PrefetchPolicy& policy, int64_t unit_bytes) {
  if (policy.share_bytes <= 0) return 0;
  return std::max<int64_t>(1, (policy.share_bytes + unit_bytes - 1) / std::max<int64_t>(unit_bytes, 1));
}

int row_streams(const PrefetchPolicy& policy, bool k_type, int threads) {
  if (!k_type || policy.k_call_streams == 0) return policy.streams;
  return std::clamp(policy.k_call_streams / std::max(threads, 1), 1, kMaxRowStreams);
}

void set_prefetch_policy(const PrefetchPolicy& policy) { active() = policy; }

std::optional<PrefetchPolicy> parse_prefetch_policy(const std::string& text, PrefetchPolicy base) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (is_blank(item)) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) return std::nullopt;
    std::string key = item.substr(0, eq);
    key.erase(0, key.find_first_not_of(" \t"));
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::optional<int64_t> value = parse_int(item.substr(eq + 1));
    if (!value || *value < 0) return std::nullopt;
    if (key == "near") {
      base.near_bytes = *value;
    } else if (key == "far") {
      base.far_bytes = *value;
    } else if (key == "stream_far") {
      base.stream_far_bytes = *value;
    } else if (key == "quant") {
      base.quant_bytes = *value;
    } else if (key == "streams" && *value >= 1 && *value <= kMaxRowStreams) {
      base.streams = static_cast<int>(*value);
    } else if (key == "kstreams" && *value <= 16) {
      base.k_call_streams = static_cast<int>(*value);
    } else if (key == "share") {
      base.share_bytes = *value;
    } else if (key == "next" && *value <= 1) {
      base.next_panel = *value == 1;
    } else {
      return std::nullopt;
    }
  }
  return base;
}

std::string describe(const PrefetchPolicy& p) {
  return "near=" + std::to_string(p.near_bytes) + ",far=" + std::to_string(p.far_bytes) +
         ",stream_far=" + std::to_string(p.stream_far_bytes) + ",next=" + (p.next_panel ? "1" : "0") +
         ",quant=" + std::to_string(p.quant_bytes) + ",streams=" + std::to_string(p.streams) +
         ",kstreams=" + std::to_string(p.k_call_streams) + ",share=" + std::to_string(p.share_bytes);
}

}  // namespace tandem::kernels
