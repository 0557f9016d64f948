// `tandem bench -m DIR [--threads N]`: B=1 prefill and decode throughput, and
// the bandwidth ceiling measured in the same run.
//
// Decode at B=1 is memory-bandwidth bound: tokens/s <= read bandwidth / bytes
// of weights streamed per token. The bandwidth is measured here, with the
// same thread count, by summing a buffer far larger than the last-level
// cache (--bw-mib, default 1024 MiB), best of several passes — so the "% of
// ceiling" compares two figures taken on the same machine in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "core/aligned_buffer.h"
#include "kernels/ops.h"
#include "model/forward.h"

namespace tandem::app {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct BenchOptions {
  std::string model_dir;
  int threads = 1;
  int prompt = 128;
  int decode = 64;
  int reps = 3;
  int bw_mib = 1024;
};

// Sums 64-bit words of [begin, end) with independent accumulators (the
// compiler vectorises integer adds; no floating-point reassociation needed).
uint64_t sum_words(const uint64_t* p, int64_t n) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a0 += p[i];
    a1 += p[i + 1];
    a2 += p[i + 2];
    a3 += p[i + 3];
    a4 += p[i + 4];
    a5 += p[i + 5];
    a6 += p[i + 6];
    a7 += p[i + 7];
  }
  for (; i < n; ++i) a0 += p[i];
  return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

// Streaming read bandwidth in bytes/s over `bytes`, best of `passes`.
double measure_read_bandwidth(ThreadPool* pool, size_t bytes, int passes) {
  const int64_t words = static_cast<int64_t>(bytes / sizeof(uint64_t));
  AlignedBuffer<uint64_t> buf(static_cast<size_t>(words));
  for (int64_t i = 0; i < words; ++i) buf[i] = static_cast<uint64_t>(i) * 2654435761u;
  std::vector<uint64_t> sink(pool ? pool->size() : 1);
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    const auto t = Clock::now();
    if (pool) {
      pool->parallel_for(words, 4096,
                         [&](int64_t b, int64_t e, int th) { sink[th] += sum_words(buf.data() + b, e - b); });
    } else {
      sink[0] += sum_words(buf.data(), words);
    }
    best = std::max(best, static_cast<double>(bytes) / seconds_since(t));
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sink) keep = keep + s;
  (void)keep;
  return best;
}

int run_bench(const BenchOptions& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem bench: %s\n", s.to_string().c_str());
    return 1;
  };
  auto t = Clock::now();
  auto loaded = model::Model::load(o.model_dir);
  if (!loaded.ok()) return fail(loaded.status());
  const model::Model& m = **loaded;
  const model::ModelConfig& c = m.config();
  std::printf("model: %s (%s, %d layers, hidden %lld, %.0fM parameters, weights %s), loaded in %.1f s\n",
              o.model_dir.c_str(), c.model_type.c_str(), c.num_layers, static_cast<long long>(c.hidden_size),
              m.parameter_count() / 1e6, kernels::dtype_name(m.lm_head().dtype()), seconds_since(t));
  std::unique_ptr<ThreadPool> pool = o.threads > 1 ? std::make_unique<ThreadPool>(o.threads) : nullptr;
  const kernels::Ctx probe_ctx;
  std::printf("threads: %d, kernels: %s, gemm: %s\n", o.threads, kernels::isa_name(probe_ctx.isa),
              kernels::gemm_mode_name(probe_ctx.gemm));

  const double bandwidth = measure_read_bandwidth(pool.get(), static_cast<size_t>(o.bw_mib) << 20, 5);
  const double bytes_per_token = static_cast<double>(m.weight_bytes_per_token());
  const double ceiling = bandwidth / bytes_per_token;
  std::printf("read bandwidth: %.1f GB/s (%d MiB working set, best of 5)\n", bandwidth / 1e9, o.bw_mib);
  std::printf("weights streamed per token: %.1f MB -> ceiling %.1f tok/s\n", bytes_per_token / 1e6, ceiling);

  auto kv = model::KvCache::create(c, model::KvCache::options_for_tokens(o.prompt + o.decode + 1));
  if (!kv.ok()) return fail(kv.status());
  model::Forward fw(m, *kv, pool.get());
  std::vector<int32_t> prompt(o.prompt);
  for (int i = 0; i < o.prompt; ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 13) % c.vocab_size);

  double best_prefill = 0, best_decode = 0;
  for (int rep = 0; rep < o.reps; ++rep) {
    model::SequenceId seq = kv->create_sequence();
    model::SequenceStep step{seq, prompt, 0, model::LogitRows::last};
    t = Clock::now();
    auto out = fw.run({&step, 1});
    if (!out.ok()) return fail(out.status());
    const double prefill = o.prompt / seconds_since(t);
    int32_t next = kernels::argmax(out->logits_row(0), c.vocab_size);
    t = Clock::now();
    for (int i = 0; i < o.decode; ++i) {
      model::SequenceStep d{seq, {&next, 1}, kv->length(seq), model::LogitRows::last};
      out = fw.run({&d, 1});
      if (!out.ok()) return fail(out.status());
      next = kernels::argmax(out->logits_row(0), c.vocab_size);
    }
    const double decode = o.decode / seconds_since(t);
    std::printf("rep %d: prefill %d tokens %.1f tok/s, decode %d tokens %.2f tok/s\n", rep, o.prompt, prefill,
                o.decode, decode);
    best_prefill = std::max(best_prefill, prefill);
    best_decode = std::max(best_decode, decode);
    kv->release(seq);
  }
  std::printf("prefill: %.1f tok/s (B=1, %d tokens, best of %d)\n", best_prefill, o.prompt, o.reps);
  std::printf("decode:  %.2f tok/s (B=1, best of %d) = %.1f%% of the %.1f tok/s bandwidth ceiling\n",
              best_decode, o.reps, 100.0 * best_decode / ceiling, ceiling);
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub =
      app.add_subcommand("bench", "Measure B=1 decode/prefill throughput against the bandwidth ceiling");
  sub->add_option("-m,--model", o->model_dir, "Hugging Face model directory")->required();
  sub->add_option("-t,--threads", o->threads, "Kernel threads")->check(CLI::Range(1, 1024));
  sub->add_option("-p,--prompt", o->prompt, "Prefill length in tokens")->check(CLI::Range(1, 1 << 16));
  sub->add_option("-n,--decode", o->decode, "Decode steps per repetition")->check(CLI::Range(1, 1 << 16));
  sub->add_option("-r,--reps", o->reps, "Repetitions (best is reported)")->check(CLI::Range(1, 100));
  sub->add_option("--bw-mib", o->bw_mib, "Working set of the bandwidth measurement, MiB")
      ->check(CLI::Range(512, 1 << 16));
  return {sub, [o] { return run_bench(*o); }};
}

}  // namespace tandem::app
