// `tandem bench -m DIR --batch 1,4,8`: batched decode throughput, the engine's
// continuous-batching step without HTTP, sampling or scheduling around it.
//
// For each batch size B, B sequences are prefilled with distinct prompts of
// --prompt tokens, then advance together for --decode steps, one forward of B
// rows per step (greedy argmax per row, as a temperature-0 server request).
// Reported: aggregate tok/s, ms per step, and the ratio to B=1 measured in the
// same run — the ceiling of what `tandem serve -np B` can gain over a single
// stream on this machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench_batch.h"
#include "kernels/ops.h"
#include "model/forward.h"

namespace tandem::app {
namespace {

using Clock = std::chrono::steady_clock;

struct BatchFigure {
  int batch = 0;
  double tok_s = 0;
  double ms_per_step = 0;
};

}  // namespace

int run_batch_bench(const model::Model& m, ThreadPool* pool, const BatchBenchOptions& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem bench: %s\n", s.to_string().c_str());
    return 1;
  };
  const model::ModelConfig& c = m.config();
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  model::KvCacheOptions kv_options = model::KvCache::options_for_tokens(o.prompt + o.decode + 1);
  kv_options.num_blocks *= max_batch;
  auto kv = model::KvCache::create(c, kv_options);
  if (!kv.ok()) return fail(kv.status());
  model::Forward fw(m, *kv, pool, std::max(max_batch, 256));
  fw.set_gemm_mode(o.gemm);

  std::vector<BatchFigure> figures;
  for (int rep = 0; rep < o.reps; ++rep) {
    for (int b : o.batches) {
      std::vector<model::SequenceId> seqs(b);
      std::vector<int32_t> next(b);
      for (int s = 0; s < b; ++s) {
        seqs[s] = kv->create_sequence();
        std::vector<int32_t> prompt(o.prompt);
        for (int i = 0; i < o.prompt; ++i)
          prompt[i] = static_cast<int32_t>((i * 7919 + s * 104729 + 13) % c.vocab_size);
        model::SequenceStep step{seqs[s], prompt, 0, model::LogitRows::last};
        auto out = fw.run({&step, 1});
        if (!out.ok()) return fail(out.status());
        next[s] = kernels::argmax(out->logits_row(0), c.vocab_size);
      }
      std::vector<model::SequenceStep> steps(b);
      model::ForwardOptions greedy;  // the picks only (on a GPU: on the device, ADR 0070)
      greedy.picks_only = true;
      const auto t = Clock::now();
      for (int i = 0; i < o.decode; ++i) {
        for (int s = 0; s < b; ++s)
          steps[s] = model::SequenceStep{seqs[s], {&next[s], 1}, kv->length(seqs[s]), model::LogitRows::last};
        auto out = fw.run(steps, greedy);
        if (!out.ok()) return fail(out.status());
        for (int s = 0; s < b; ++s) next[s] = out->argmax_row(s);
      }
      const double secs = std::chrono::duration<double>(Clock::now() - t).count();
      const BatchFigure f{b, static_cast<double>(b) * o.decode / secs, 1e3 * secs / o.decode};
      std::printf("rep %d: batch %2d: %d steps, %.2f ms/step, %.2f tok/s\n", rep, b, o.decode, f.ms_per_step,
                  f.tok_s);
      figures.push_back(f);
      for (model::SequenceId s : seqs) kv->release(s);
    }
  }
  // Best of the repetitions per batch size; ratios against the best B=1.
  auto best = [&](int b) {
    BatchFigure top;
    for (const BatchFigure& f : figures)
      if (f.batch == b && f.tok_s > top.tok_s) top = f;
    return top;
  };
  const double base = best(o.batches.front()).tok_s;
  std::printf("\n| batch | ms/step | aggregate tok/s | x batch %d |\n| ---: | ---: | ---: | ---: |\n",
              o.batches.front());
  for (int b : o.batches) {
    const BatchFigure f = best(b);
    std::printf("| %d | %.2f | %.2f | %.2f |\n", b, f.ms_per_step, f.tok_s, f.tok_s / base);
  }
  return 0;
}

}  // namespace tandem::app
