// `tandem bench -m DIR --verify 1,2,4,5,8`: what a speculative round's
// verify forward costs against a decode step, and what that allows.
//
// One sequence is prefilled with --prompt tokens; then, for each block size K,
// the forward of K rows at that context (a greedy pick for every row, as a
// greedy verify block) runs --decode times, the KV rolled back after each, against the
// forward of one row (a decode step). Reported per K:
//   verify ms and verify / step;
//   all-accepted tok/s = K tokens per verify forward with a free drafter —
//     the upper bound of any round of block size K (acceptance 1), against
//     classic decode's 1000 / step ms;
//   self-draft tok/s = K tokens per round when the drafter is the target
//     itself (acceptance 1 by construction): K - 1 decode steps to draft, then
//     the verify forward.
// K is tandem's block size (SPEC-speculative.md): the verify forward carries the last
// token and K - 1 drafts, and a round emits at most K tokens. A "K drafts"
// convention verifies K + 1 rows: read the row of K + 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_verify.h"
#include "model/forward.h"

namespace tandem::app {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int run_verify_bench(const model::Model& m, ThreadPool* pool, const VerifyBenchOptions& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem bench: %s\n", s.to_string().c_str());
    return 1;
  };
  const model::ModelConfig& c = m.config();
  std::vector<int> rows = o.rows;
  if (std::find(rows.begin(), rows.end(), 1) == rows.end()) rows.insert(rows.begin(), 1);
  const int widest = *std::max_element(rows.begin(), rows.end());
  auto kv = model::KvCache::create(c, model::KvCache::options_for_tokens(o.prompt + widest + 1));
  if (!kv.ok()) return fail(kv.status());
  model::Forward fw(m, *kv, pool, std::max(widest, 16));
  fw.set_gemm_mode(o.gemm);
  const model::SequenceId seq = kv->create_sequence();
  std::vector<int32_t> prompt(o.prompt);
  for (int i = 0; i < o.prompt; ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 13) % c.vocab_size);
  model::SequenceStep prefill{seq, prompt, 0, model::LogitRows::last};
  if (auto out = fw.run({&prefill, 1}); !out.ok()) return fail(out.status());
  std::vector<int32_t> block(static_cast<size_t>(widest));
  for (int i = 0; i < widest; ++i) block[i] = static_cast<int32_t>((i * 104729 + 5) % c.vocab_size);

  // Best (lowest) mean ms per forward of `n` rows over the repetitions.
  auto time_rows = [&](int n) -> Expected<double> {
    model::SequenceStep step{seq, {block.data(), static_cast<size_t>(n)}, o.prompt, model::LogitRows::all};
    model::ForwardOptions greedy;  // a greedy round's rows: picks only (on a GPU: on the device, ADR 0070)
    greedy.picks_only = true;
    auto once = [&]() -> Status {
      auto out = fw.run({&step, 1}, greedy);
      if (!out.ok()) return out.status();
      kv->truncate(seq, o.prompt);
      return Status::Ok();
    };
    TANDEM_RETURN_IF_ERROR(once());  // warm: a first call may capture a graph
    double best = 0;
    for (int rep = 0; rep < o.reps; ++rep) {
      const auto t = Clock::now();
      for (int i = 0; i < o.decode; ++i) TANDEM_RETURN_IF_ERROR(once());
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count() / o.decode;
      best = rep == 0 ? ms : std::min(best, ms);
    }
    return best;
  };
  auto step = time_rows(1);
  if (!step.ok()) return fail(step.status());
  const double step_ms = *step, classic = 1000.0 / step_ms;
  std::printf("verify blocks at context %d, one sequence, %d forwards per size, best of %d, gemm %s\n",
              o.prompt, o.decode, o.reps, kernels::gemm_mode_name(o.gemm));
  std::printf("decode step (1 row): %.3f ms = %.2f tok/s classic\n", step_ms, classic);
  std::printf(
      "\n| K (rows) | verify ms | verify / step | all-accepted tok/s | x classic | self-draft tok/s | x "
      "classic "
      "|\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int n : rows) {
    auto ms = n == 1 ? step : time_rows(n);
    if (!ms.ok()) return fail(ms.status());
    const double upper = 1000.0 * n / *ms, self = 1000.0 * n / ((n - 1) * step_ms + *ms);
    std::printf("| %d | %.3f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", n, *ms, *ms / step_ms, upper,
                upper / classic, self, self / classic);
  }
  return 0;
}

}  // namespace tandem::app
