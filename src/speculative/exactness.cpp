#include "speculative/exactness.h"

#include <cstring>
#include <vector>

#include "core/env.h"
#include "core/log.h"
#include "kernels/ops.h"
#include "model/device.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace tandem::speculative {
namespace {

constexpr int kProbePromptTokens = 8;

struct Draw {
  int salt;
  int prompt_tokens;
};

// Three draws as specified, plus one whose block straddles the first
// attention chunk boundary (more evidence: a chunked-attention bug shows here).
std::vector<Draw> probe_draws(int block_size) {
  std::vector<Draw> draws;
  for (int d = 0; d < kProbeDraws; ++d) draws.push_back({d * 977 + 1, kProbePromptTokens});
  const int crossing = std::max(1, kernels::kAttentionChunk - block_size / 2);
  draws.push_back({kProbeDraws * 977 + 1, crossing});
  return draws;
}

struct DrawOutcome {
  bool ok = true;
  std::string why;
  int32_t position = -1;
  size_t differing = 0, total = 0;
};

DrawOutcome run_draw(model::Forward& fwd, model::KvCache& kv, const Draw& draw, int block_size,
                     int64_t vocab) {
  DrawOutcome out;
  std::vector<int32_t> prompt(draw.prompt_tokens), block(block_size);
  for (int i = 0; i < draw.prompt_tokens; ++i)
    prompt[i] = static_cast<int32_t>((7LL * i + 1 + draw.salt) % vocab);
  for (int i = 0; i < block_size; ++i) block[i] = static_cast<int32_t>((13LL * i + 3 + draw.salt) % vocab);

  const model::SequenceId seq = kv.create_sequence();
  auto run = [&](std::span<const int32_t> tokens, int64_t start, model::LogitRows rows) {
    model::SequenceStep step{seq, tokens, start, rows};
    return fwd.run(std::span<const model::SequenceStep>(&step, 1));
  };
  auto fail = [&](const Status& s) {
    kv.release(seq);
    out.ok = false;
    out.why = s.message();
    return out;
  };

  const int64_t P = draw.prompt_tokens;
  if (auto r = run(prompt, 0, model::LogitRows::none); !r.ok()) return fail(r.status());
  // Chain arm: one plain decode step per block token.
  std::vector<float> chain(static_cast<size_t>(block_size) * vocab);
  for (int i = 0; i < block_size; ++i) {
    auto r = run(std::span<const int32_t>(&block[i], 1), P + i, model::LogitRows::last);
    if (!r.ok()) return fail(r.status());
    std::memcpy(&chain[static_cast<size_t>(i) * vocab], r->logits_row(0), sizeof(float) * vocab);
  }
  // Block arm: the verify path, one forward over all K tokens.
  kv.truncate(seq, P);
  auto r = run(block, P, model::LogitRows::all);
  if (!r.ok()) return fail(r.status());
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(vocab);
  for (int i = 0; i < block_size; ++i) {
    const auto* a = reinterpret_cast<const unsigned char*>(&chain[static_cast<size_t>(i) * vocab]);
    const auto* b = reinterpret_cast<const unsigned char*>(r->logits_row(i));
    if (std::memcmp(a, b, row_bytes) == 0) continue;
    out.position = i;
    out.total = row_bytes;
    for (size_t k = 0; k < row_bytes; ++k) out.differing += a[k] != b[k];
    break;
  }
  kv.release(seq);
  return out;
}

}  // namespace

std::string ProbeResult::reason() const {
  if (!ran) return "exactness probe did not run: " + why;
  if (!declared.empty()) return declared;
  if (exact) return "verify block is byte-identical to the single-token chain";
  return "verify block position " + std::to_string(position) + " differs from the single-token chain in " +
         std::to_string(differing_bytes) + " of " + std::to_string(total_bytes) + " logit bytes";
}

ProbeResult run_exactness_probe(const model::Model& model, ThreadPool* pool, int block_size,
                                kernels::GemmMode gemm) {
  ProbeResult result;
  if (block_size < 1) {
    result.why = "block size " + std::to_string(block_size) + " is below 1";
    return result;
  }
  if (gemm == kernels::GemmMode::splitk && model.placement().kind == model::DeviceKind::cuda) {
    result.ran = true;
    result.declared =
        "the splitk matmul on the GPU is cuBLAS, which is not batch-invariant by contract (its algorithm may "
        "change with the row count); declared inexact without measuring";
    return result;
  }
  const auto draws = probe_draws(block_size);
  int64_t longest = 0;
  for (const auto& d : draws) longest = std::max<int64_t>(longest, d.prompt_tokens + block_size);
  auto kv = model::KvCache::create(model.config(), model::KvCache::options_for_tokens(longest + 16, 16));
  if (!kv.ok()) {
    result.why = kv.status().message();
    return result;
  }
  model::Forward fwd(model, *kv, pool, std::max<int64_t>(longest, 16));
  fwd.set_gemm_mode(gemm);
  const int64_t vocab = model.config().vocab_size;
  for (const auto& draw : draws) {
    DrawOutcome o = run_draw(fwd, *kv, draw, block_size, vocab);
    if (!o.ok) {
      result.why = o.why;
      return result;
    }
    if (o.position >= 0) {
      result.ran = true;
      result.position = o.position;
      result.differing_bytes = o.differing;
      result.total_bytes = o.total;
      return result;
    }
  }
  result.ran = true;
  result.exact = true;
  return result;
}

ExactnessGate ExactnessGate::for_model(const model::Model& model, ThreadPool* pool, bool allow_inexact,
                                       GemmRequest gemm) {
  return ExactnessGate(
      model.dir(),
      [&model, pool](int k, kernels::GemmMode mode) { return run_exactness_probe(model, pool, k, mode); },
      allow_inexact, gemm);
}

ExactnessGate::ExactnessGate(std::string model_identity, ProbeFn probe, bool allow_inexact, GemmRequest gemm)
    : identity_(std::move(model_identity)),
      probe_(std::move(probe)),
      allow_inexact_(allow_inexact),
      gemm_(gemm) {}

const GateDecision& ExactnessGate::decide(int block_size) {
  auto it = memo_.find(block_size);
  if (it == memo_.end()) it = memo_.emplace(block_size, evaluate(block_size)).first;
  return it->second;
}

GateDecision ExactnessGate::evaluate(int block_size) {
  ++probe_runs_;
  const kernels::GemmMode requested = gemm_.mode;
  ProbeResult result = probe_(block_size, requested);
  std::string also_tried;
  if (result.ran && !result.exact && requested != kernels::GemmMode::invariant) {
    if (gemm_.pinned) {
      also_tried = " The kernel retry was skipped because TANDEM_GEMM is pinned.";
    } else {
      ++probe_runs_;
      ProbeResult retry = probe_(block_size, kernels::GemmMode::invariant);
      if (retry.ran && retry.exact) {
        spdlog::info(
            "exactness gate: the {} matmul kernel is not batch-invariant ({}); switched the process to the "
            "invariant kernel, which gives up split-K's speed-up on narrow shapes (model={} block_size={})",
            kernels::gemm_mode_name(requested), result.reason(), identity_, block_size);
        result = retry;
        gemm_.mode = kernels::GemmMode::invariant;  // the caller's Forwards follow gemm_mode()
      } else {
        also_tried = " Switching to the invariant kernel did not make it exact either.";
      }
    }
  }
  GateDecision d;
  d.gemm = gemm_.mode;
  d.exact = result.ran && result.exact;
  d.probe_reason = result.reason();
  d.allowed = d.exact || allow_inexact_;
  if (d.exact) {
    spdlog::info("exactness probe: {} (model={} block_size={})", d.probe_reason, identity_, block_size);
  } else if (d.allowed) {
    spdlog::warn(
        "exactness probe: {}{} TANDEM_MTP_ALLOW_INEXACT is set, so speculative decoding engages anyway: "
        "temperature-0 output will not be byte-identical to classic decode on this host (model={} "
        "block_size={})",
        d.probe_reason, ".", identity_, block_size);
  } else {
    d.decline_reason = trim(d.probe_reason + "." + also_tried);
    spdlog::warn(
        "speculative decoding declined: {} Falling back to classic decode. Set TANDEM_MTP_ALLOW_INEXACT=1 to "
        "engage anyway and give up byte-identical output. (model={} block_size={})",
        *d.decline_reason, identity_, block_size);
  }
  return d;
}

}  // namespace tandem::speculative
