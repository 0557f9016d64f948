// `tandem bench -m DIR [--threads N]`: B=1 prefill and decode throughput, and
// the bandwidth ceiling measured in the same run.
//
// Decode at B=1 is memory-bandwidth bound: tokens/s <= read bandwidth / bytes
// of weights streamed per token. The bandwidth is measured here, with the
// same thread count, by summing a buffer far larger than the last-level
// cache (--bw-mib, default 1024 MiB), best of several four-stream (plain and
// prefetching) and one-stream passes per thread — so the "% of ceiling"
// compares two figures taken on the same machine in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_batch.h"
#include "bench_spec.h"
#include "bench_verify.h"
#include "commands.h"
#include "common_options.h"
#include "core/aligned_buffer.h"
#include "core/cpu_features.h"
#include "drafter_setup.h"
#include "environment.h"
#include "kernels/ops.h"
#include "kernels/prefetch.h"
#include "model/forward.h"
#include "runtime/opened_model.h"
#include "sampling/sampler.h"
#include "scheduler/metrics.h"
#include "speculative/pick.h"

namespace tandem::app {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A matrix's type; a stacked one (parts of different block types) as "q5_0+q5_0+q8_0".
std::string type_label(const kernels::PackedMatrix& w) {
  if (w.parts().empty()) return kernels::dtype_name(w.dtype());
  std::string out;
  for (const kernels::PackedMatrix& p : w.parts())
    out += (out.empty() ? "" : "+") + std::string(kernels::dtype_name(p.dtype()));
  return out;
}

// MB streamed per token by each type over every layer's matrices (a GGUF file's
// layers may differ: llama.cpp's Q4_K_M gives some layers more bits).
std::string layer_bytes_by_type(const model::Model& m) {
  std::vector<std::pair<std::string, size_t>> bytes;
  auto add = [&](const kernels::PackedMatrix& w) {
    if (w.n() == 0) return;
    auto one = [&](const kernels::PackedMatrix& p) {
      const std::string name = kernels::dtype_name(p.dtype());
      auto it = std::find_if(bytes.begin(), bytes.end(), [&](const auto& e) { return e.first == name; });
      if (it == bytes.end())
        bytes.emplace_back(name, p.weight_bytes());
      else
        it->second += p.weight_bytes();
    };
    if (w.parts().empty()) one(w);
    for (const kernels::PackedMatrix& p : w.parts()) one(p);
  };
  for (const model::LayerWeights& l : m.layers()) {
    for (const kernels::PackedMatrix* w : {&l.qkv, &l.o, &l.gate_up, &l.down}) add(*w);
  }
  std::string out;
  for (const auto& [name, b] : bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.1f MB", out.empty() ? "" : ", ", name.c_str(), b / 1e6);
    out += buf;
  }
  return out;
}

struct BenchOptions {
  std::string model_dir;
  std::string weights;  // --weights
  int threads = 1;
  int prompt = 128;
  int decode = 64;
  int reps = 3;
  int bw_mib = 1024;
  std::string device;
  std::vector<int> batches;  // --batch: batched decode instead of the B=1 ceiling run
  std::vector<int> verify;   // --verify: verify-block cost instead of the B=1 ceiling run
  float temperature = 0.0f;  // --temp: decode samples (the seeded sampler, ADR 0002) instead of greedy
  uint64_t seed = 0;         // --seed
};

// The read loops the ceiling takes the best of: four streams at once
// (quarters of the range, one vector each per step: several concurrent
// streams keep more cache-line fills in flight, as a matmul walking several
// weight panels does), the same prefetching a page ahead, and one stream of
// four consecutive vectors per step (on the Zen 4 VM one core read 27 GB/s
// that way against ~20 with four streams: bench_kernels' BM_ReadBandwidth,
// 2026-12-06).
enum class Reader { four, four_prefetch, one };
constexpr Reader kReaders[] = {Reader::four, Reader::four_prefetch, Reader::one};

// Sums 64-bit words of [p, p + n) with four independent accumulators: integer
// adds, so the compiler may vectorise without reassociating floats. The AVX2 /
// AVX-512 copies (chosen at run time) keep the loop from being the bottleneck.
// always_inline: only inlined into its target("avx2") / target("avx512f")
// callers is it compiled for their ISA; as a call, GCC built the 32- and
// 64-byte vectors out of SSE2 pieces through the stack, and one Zen 4 core
// read 9.3 GB/s with it against 19.8 GB/s inlined (2026-12-06; the bf16 decode
// itself streamed 22 GB/s, so "reached" printed 230%).
template <typename V, Reader R>
inline __attribute__((always_inline)) uint64_t sum_words_generic(const uint64_t* p, int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(uint64_t);
  constexpr bool kOne = R == Reader::one;
  const int64_t quarter = n / 4 / kLanes * kLanes;  // words per accumulator
  // Accumulator j loads p + j * gap + i: quarters apart, or adjacent vectors.
  const int64_t gap = kOne ? kLanes : quarter;
  const int64_t step = kOne ? 4 * kLanes : kLanes;
  const int64_t end = kOne ? 4 * quarter : quarter;
  const uint64_t* s0 = p;
  const uint64_t* s1 = p + gap;
  const uint64_t* s2 = p + 2 * gap;
  const uint64_t* s3 = p + 3 * gap;
  V a0{}, a1{}, a2{}, a3{};
  constexpr int64_t kAhead = 4096 / sizeof(uint64_t);  // one page, as the matmul kernels prefetch
  for (int64_t i = 0; i < end; i += step) {
    if (R == Reader::four_prefetch && (i * sizeof(uint64_t)) % 64 == 0) {
      __builtin_prefetch(s0 + i + kAhead);
      __builtin_prefetch(s1 + i + kAhead);
      __builtin_prefetch(s2 + i + kAhead);
      __builtin_prefetch(s3 + i + kAhead);
    }
    V x0, x1, x2, x3;
    std::memcpy(&x0, s0 + i, sizeof(V));
    std::memcpy(&x1, s1 + i, sizeof(V));
    std::memcpy(&x2, s2 + i, sizeof(V));
    std::memcpy(&x3, s3 + i, sizeof(V));
    a0 += x0;
    a1 += x1;
    a2 += x2;
    a3 += x3;
  }
  V a = a0 + a1 + a2 + a3;
  uint64_t total = 0;
  for (int64_t l = 0; l < kLanes; ++l) total += a[l];
  for (int64_t i = 4 * quarter; i < n; ++i) total += p[i];
  return total;
}

using U64x2 = uint64_t __attribute__((vector_size(16)));
using U64x4 = uint64_t __attribute__((vector_size(32)));
using U64x8 = uint64_t __attribute__((vector_size(64)));

template <Reader R>
uint64_t sum_words_sse2(const uint64_t* p, int64_t n) {
  return sum_words_generic<U64x2, R>(p, n);
}
template <Reader R>
__attribute__((target("avx2"))) uint64_t sum_words_avx2(const uint64_t* p, int64_t n) {
  return sum_words_generic<U64x4, R>(p, n);
}
template <Reader R>
__attribute__((target("avx512f"))) uint64_t sum_words_avx512(const uint64_t* p, int64_t n) {
  return sum_words_generic<U64x8, R>(p, n);
}
template <Reader R>
uint64_t sum_words(const uint64_t* p, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx512 ? sum_words_avx512<R>(p, n) : avx2 ? sum_words_avx2<R>(p, n) : sum_words_sse2<R>(p, n);
}

uint64_t sum_words(Reader r, const uint64_t* p, int64_t n) {
  switch (r) {
    case Reader::four:
      return sum_words<Reader::four>(p, n);
    case Reader::four_prefetch:
      return sum_words<Reader::four_prefetch>(p, n);
    case Reader::one:
      break;
  }
  return sum_words<Reader::one>(p, n);
}

// Streaming read bandwidth in bytes/s over `buf`: the fastest of `passes`
// rounds of every reader, so the yardstick is at least as good at streaming
// as the kernels' own policy.
double measure_read_bandwidth(ThreadPool* pool, const AlignedBuffer<uint64_t>& buf, int passes) {
  const int64_t words = static_cast<int64_t>(buf.size());
  const size_t bytes = buf.size() * sizeof(uint64_t);
  std::vector<uint64_t> sink(pool ? pool->size() : 1);
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    for (Reader r : kReaders) {
      const auto t = Clock::now();
      if (pool) {
        pool->parallel_for(words, 4096, [&](int64_t b, int64_t e, int th) {
          sink[th] += sum_words(r, buf.data() + b, e - b);
        });
      } else {
        sink[0] += sum_words(r, buf.data(), words);
      }
      best = std::max(best, static_cast<double>(bytes) / seconds_since(t));
    }
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sink) keep = keep + s;
  (void)keep;
  return best;
}

// The first line of every `tandem bench` report, so each figure says where it
// was taken: the CPU model and the kernel variant the run uses (TANDEM_KERNELS
// may lower it below the best this CPU supports), then the vendor's software
// prefetch policy (ADR 0049).
void print_machine() {
  const kernels::Isa isa = kernels::active_isa();
  std::printf("cpu: %s (kernels: %s, best supported: %s)\n", cpu_features().model_name.c_str(),
              kernels::isa_name(isa), kernels::isa_name(kernels::best_supported_isa()));
  std::printf("prefetch: %s (%s)\n", kernels::describe(kernels::prefetch_policy()).c_str(),
              cpu_vendor_name(cpu_features().vendor));
}

int run_bench(const BenchOptions& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem bench: %s\n", s.to_string().c_str());
    return 1;
  };
  auto t = Clock::now();
  auto weights = resolve_weights_option(o.weights);
  if (!weights.ok()) return usage_error("bench", weights.status());
  runtime::OpenOptions open{o.model_dir, {}, o.threads};
  open.weights = *weights;
  open.pool_for_one_thread = false;  // one thread: the kernels run on this thread, no pool
  open.device = resolve_device_option(o.device);
  auto opened = runtime::open_model(open);
  if (!opened.ok()) return fail(opened.status());
  const model::Model& m = *opened->model;
  const model::ModelConfig& c = m.config();
  // --weights may give the layers' matrices other types than the LM head (model/weights_quant.h).
  const model::LayerWeights& l0 = m.layers().front();
  std::printf(
      "model: %s (%s, %d layers, hidden %lld, %.0fM parameters, weights %s: layer 0 qkv %s, o %s, gate/up "
      "%s, down "
      "%s, "
      "lm head %s), loaded in %.1f s\n",
      o.model_dir.c_str(), c.model_type.c_str(), c.num_layers, static_cast<long long>(c.hidden_size),
      m.parameter_count() / 1e6, model::weights_quant_name(c.weights), type_label(l0.qkv).c_str(),
      type_label(l0.o).c_str(), type_label(l0.gate_up).c_str(), type_label(l0.down).c_str(),
      type_label(m.lm_head()).c_str(), seconds_since(t));
  std::printf("layer matrices by type (all layers): %s\n", layer_bytes_by_type(m).c_str());
  const std::unique_ptr<ThreadPool>& pool = opened->pool;
  // bench takes no --gemm: TANDEM_GEMM's pin or the invariant kernel.
  auto gemm = resolve_gemm_option("");
  if (!gemm.ok()) return fail(gemm.status());
  const kernels::Ctx probe_ctx;
  std::printf("threads: %d, kernels: %s, gemm: %s, bf16 weights x %s activations%s\n", o.threads,
              kernels::isa_name(probe_ctx.isa), kernels::gemm_mode_name(gemm->mode),
              kernels::activations_name(probe_ctx.act),
              probe_ctx.act == kernels::Activations::bf16 && !kernels::bf16_activations_native()
                  ? (probe_ctx.isa == kernels::Isa::avx512 ? " (no AVX512_BF16 here: its FMA emulation)"
                                                           : " (no AVX512_BF16 here: the scalar reference)")
                  : "");
  if (!o.batches.empty())
    return run_batch_bench(m, pool.get(), {o.batches, o.prompt, o.decode, o.reps, gemm->mode});
  if (!o.verify.empty())
    return run_verify_bench(m, pool.get(), {o.verify, o.prompt, o.decode, o.reps, gemm->mode});

  // On a GPU the ceiling is the device memory's read bandwidth, measured the same way
  // (a buffer far beyond L2, best of passes), with --bw-mib of device memory.
  const bool on_gpu = m.placement().kind == model::DeviceKind::cuda;
  AlignedBuffer<uint64_t> bw_buffer(on_gpu ? 0 : (static_cast<size_t>(o.bw_mib) << 20) / sizeof(uint64_t));
  for (size_t i = 0; i < bw_buffer.size(); ++i) bw_buffer[i] = i * 2654435761u;
  auto read_bandwidth = [&](int passes) -> double {
    if (!on_gpu) return measure_read_bandwidth(pool.get(), bw_buffer, passes);
    auto bw = model::device_read_bandwidth(m.placement(), static_cast<size_t>(o.bw_mib) << 20, passes);
    return bw.ok() ? *bw : 0.0;
  };
  if (on_gpu) std::printf("device: %s\n", model::device_name(m.placement()).c_str());
  double best_bandwidth = read_bandwidth(3);
  const double bytes_per_token = static_cast<double>(m.weight_bytes_per_token());
  std::printf(
      "read bandwidth: %.1f GB/s (%d MiB working set, best of 3 four-stream plain, 3 four-stream "
      "prefetching and 3 one-stream passes per thread)\n",
      best_bandwidth / 1e9, o.bw_mib);
  std::printf("weights streamed per token: %.1f MB -> ceiling %.1f tok/s\n", bytes_per_token / 1e6,
              best_bandwidth / bytes_per_token);
  if (c.moe.num_experts > 0) {  // what the routed experts contribute, against reading them all
    size_t expert = 0, layers = 0;
    for (const auto& l : m.layers()) {
      if (l.experts.empty()) continue;
      expert = l.experts[0].gate_up.weight_bytes() + l.experts[0].down.weight_bytes();
      ++layers;
    }
    std::printf(
        "  of which routed experts: top-%d of %d per MoE layer x %zu layers = %.1f MB (all experts: %.1f "
        "MB)\n",
        c.moe.top_k, c.moe.num_experts, layers, 1e-6 * static_cast<double>(c.moe.top_k * expert * layers),
        1e-6 * static_cast<double>(c.moe.num_experts * expert * layers));
  }

  auto kv = model::KvCache::create(c, model::KvCache::options_for_tokens(o.prompt + o.decode + 1));
  if (!kv.ok()) return fail(kv.status());
  model::Forward fw(m, *kv, pool.get(), forward_chunk_rows(on_gpu));
  fw.set_gemm_mode(gemm->mode);
  std::vector<int32_t> prompt(o.prompt);
  for (int i = 0; i < o.prompt; ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 13) % c.vocab_size);

  // Each repetition measures the read bandwidth right before its decode run,
  // so the per-repetition ratio compares figures taken under the same
  // background load; the summary also divides the best decode by the best
  // bandwidth seen anywhere in the run (the conservative figure).
  double best_prefill = 0, best_decode = 0;
  std::vector<double> ratios;
  for (int rep = 0; rep < o.reps; ++rep) {
    model::SequenceId seq = kv->create_sequence();
    model::SequenceStep step{seq, prompt, 0, model::LogitRows::last};
    t = Clock::now();
    auto out = fw.run({&step, 1});
    if (!out.ok()) return fail(out.status());
    const double prefill = o.prompt / seconds_since(t);
    int32_t next = kernels::argmax(out->logits_row(0), c.vocab_size);
    const double bandwidth = read_bandwidth(1);
    // The picks only (on a GPU: on the device, ADR 0070 and 0072); --temp: a
    // request with only a temperature, picked as the engine picks it.
    sampling::SamplingParams params;
    params.temperature = o.temperature;
    params.seed = o.seed;
    sampling::Sampler sampler;
    std::vector<kernels::PickRule> rules;
    t = Clock::now();
    for (int i = 0; i < o.decode; ++i) {
      const int64_t position = kv->length(seq);
      model::SequenceStep d{seq, {&next, 1}, position, model::LogitRows::last};
      model::ForwardOptions options = speculative::pick_options(params, false, position + 1, 1, rules);
      // The next step queued on a GPU behind this one, as the engine's decode ticks do (ADR 0090).
      options.chain = i + 1 < o.decode;
      out = fw.run({&d, 1}, options);
      if (!out.ok()) return fail(out.status());
      next = params.greedy() ? out->argmax_row(0)
                             : speculative::pick_row(sampler, *out, 0, params, {prompt, {}}, position + 1);
    }
    const double decode = o.decode / seconds_since(t);
    const double ratio = decode * bytes_per_token / bandwidth;
    ratios.push_back(ratio);
    std::printf(
        "rep %d: prefill %d tokens %.1f tok/s; read %.1f GB/s, then decode %d tokens %.2f tok/s = %.1f%%\n",
        rep, o.prompt, prefill, bandwidth / 1e9, o.decode, decode, 100.0 * ratio);
    best_prefill = std::max(best_prefill, prefill);
    best_decode = std::max(best_decode, decode);
    best_bandwidth = std::max(best_bandwidth, bandwidth);
    kv->release(seq);
  }
  best_bandwidth = std::max(best_bandwidth, read_bandwidth(3));
  std::sort(ratios.begin(), ratios.end());
  const double ceiling = best_bandwidth / bytes_per_token;
  std::printf("prefill: %.1f tok/s (B=1, %d tokens, best of %d)\n", best_prefill, o.prompt, o.reps);
  if (o.temperature > 0.0f)
    std::printf("decode:  %.2f tok/s (B=1, best of %d, sampled at temperature %g)\n", best_decode, o.reps,
                o.temperature);
  else
    std::printf("decode:  %.2f tok/s (B=1, best of %d)\n", best_decode, o.reps);
  std::printf("ceiling: %.1f GB/s best read in this run / %.1f MB per token = %.1f tok/s\n",
              best_bandwidth / 1e9, bytes_per_token / 1e6, ceiling);
  std::printf("reached: %.1f%% (best decode / best-read ceiling); per-repetition median %.1f%%\n",
              100.0 * best_decode / ceiling, 100.0 * ratios[ratios.size() / 2]);
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub =
      app.add_subcommand("bench", "Measure B=1 decode/prefill throughput against the bandwidth ceiling");
  add_model_option(sub, o->model_dir);
  add_threads_option(sub, o->threads, 1);
  add_device_option(sub, o->device);
  add_weights_option(sub, o->weights);
  sub->add_option("-p,--prompt", o->prompt, "Prefill length in tokens")->check(CLI::Range(1, 1 << 16));
  sub->add_option("-n,--decode", o->decode, "Decode steps per repetition")->check(CLI::Range(1, 1 << 16));
  sub->add_option("-r,--reps", o->reps, "Repetitions (best is reported)")->check(CLI::Range(1, 100));
  sub->add_option("--bw-mib", o->bw_mib, "Working set of the bandwidth measurement, MiB")
      ->check(CLI::Range(512, 1 << 16));
  sub->add_option("--batch", o->batches,
                  "Batch sizes (e.g. 1,4,8): batched decode throughput, ratios against the first")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  sub->add_option("--verify", o->verify,
                  "Verify block sizes K (e.g. 1,2,4,5,8): the K-row forward against a decode step and the "
                  "tok/s of rounds whose drafts are all accepted")
      ->delimiter(',')
      ->check(CLI::Range(1, 16));
  // With a drafter: classic vs speculative (cmd_bench_spec.cpp).
  // With -md (a drafter): classic vs speculative decoding instead.
  auto spec = std::make_shared<SpecBenchOptions>();
  add_drafter_options(sub, spec->drafter, false);
  const auto k_range = CLI::Range(scheduler::kMinDraftBlockSize, scheduler::kMaxDraftBlockSize);
  CLI::Option* k_min =
      sub->add_option("--k-min", spec->k_min,
                      "Smallest block size K to measure (default 2, or TANDEM_DRAFT_BLOCK_SIZE)")
          ->check(k_range);
  CLI::Option* k_max =
      sub->add_option("--k-max", spec->k_max,
                      "Largest block size K to measure (default 6, or TANDEM_DRAFT_BLOCK_SIZE)")
          ->check(k_range);
  sub->add_option("--temp", spec->temperature, "Sampling temperature (0 = greedy)");
  sub->add_option("--seed", spec->seed, "Sampling seed");
  sub->add_option("--prompt-file", spec->prompt_file, "Prompts, one per line (held-out text)");
  sub->add_option("--prompts", spec->prompts, "Number of prompts")->check(CLI::Range(1, 1000));
  return {sub, [o, spec, k_min, k_max] {
            auto startup = [&]() -> Status {
              TANDEM_RETURN_IF_ERROR(validate_environment());
              TANDEM_RETURN_IF_ERROR(resolve_drafter_options(spec->drafter));
              // TANDEM_DRAFT_BLOCK_SIZE measures that one K unless --k-min / --k-max say otherwise.
              if (spec->drafter.block_size > 0 && k_min->count() == 0 && k_max->count() == 0)
                spec->k_min = spec->k_max = spec->drafter.block_size;
              if (spec->k_min > spec->k_max)
                return invalid_argument("--k-min " + std::to_string(spec->k_min) +
                                        " is larger than --k-max " + std::to_string(spec->k_max));
              return Status::Ok();
            };
            if (Status s = startup(); !s.ok()) return usage_error("bench", s);
            print_machine();
            if (!spec->drafter.has_drafter()) {
              o->temperature = spec->temperature;
              o->seed = spec->seed.value_or(kBenchSeed);
              return run_bench(*o);
            }
            spec->model_dir = o->model_dir;
            spec->threads = o->threads;
            spec->device = resolve_device_option(o->device);
            auto weights = resolve_weights_option(o->weights);
            if (!weights.ok()) return usage_error("bench", weights.status());
            spec->weights = *weights;
            spec->prompt_tokens = o->prompt == 128 ? 64 : o->prompt;
            spec->decode = o->decode;
            return run_spec_bench(*spec);
          }};
}

}  // namespace tandem::app
