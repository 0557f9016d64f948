// `tandem bench -m DIR -md DIR`: classic vs speculative B=1 decoding on the
// same prompts in one run — tokens/s, acceptance rate, mean accepted length
// and the cost of a verify round in classic decode steps, per block size K.
// Every speculative stream is also compared with the classic one (it must be
// identical; a mismatch is reported and fails the command).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_spec.h"
#include "drafter_setup.h"
#include "environment.h"
#include "model/forward.h"
#include "runtime/opened_model.h"
#include "speculative/exactness.h"
#include "speculative/sequence.h"
#include "tokenizer/tokenizer.h"

namespace tandem::app {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

Expected<std::vector<std::vector<int32_t>>> load_prompts(const SpecBenchOptions& o, const model::Model& m,
                                                         const std::optional<tok::Tokenizer>& tokenizer) {
  std::vector<std::vector<int32_t>> prompts;
  if (o.prompt_file.empty()) {
    for (int p = 0; p < o.prompts; ++p) {
      std::vector<int32_t> ids;
      for (int i = 0; i < o.prompt_tokens; ++i)
        ids.push_back(static_cast<int32_t>((1009LL * p + 7919LL * i + 17) % m.config().vocab_size));
      prompts.push_back(std::move(ids));
    }
    return prompts;
  }
  // No tokenizer.json: the loader's error.
  if (!tokenizer) return tok::Tokenizer::from_file(o.model_dir + "/tokenizer.json").status();
  const tok::Tokenizer& t = *tokenizer;
  std::ifstream in(o.prompt_file);
  if (!in) return not_found("--prompt-file " + o.prompt_file + ": cannot open");
  std::string line;
  while (static_cast<int>(prompts.size()) < o.prompts && std::getline(in, line)) {
    std::vector<int32_t> ids = t.encode(line, true);
    if (static_cast<int>(ids.size()) < o.prompt_tokens) continue;
    ids.resize(o.prompt_tokens);
    prompts.push_back(std::move(ids));
  }
  if (prompts.empty())
    return invalid_argument("--prompt-file " + o.prompt_file + ": no line has " +
                            std::to_string(o.prompt_tokens) + " tokens");
  return prompts;
}

struct Run {
  std::vector<int32_t> tokens;
  double decode_ms = 0;
  int64_t steps = 0, rounds = 0, drafted = 0, accepted = 0;
  double round_ms = 0, verify_ms = 0;
};

Expected<Run> decode(model::Forward& f, model::KvCache& kv, speculative::Drafter* drafter, int k,
                     const std::vector<int32_t>& prompt, const sampling::SamplingParams& params, int n) {
  sampling::Sampler sampler;
  speculative::SequenceState s;
  s.seq = kv.create_sequence();
  s.prompt = prompt;
  s.params = params;
  s.keep_hidden = drafter && drafter->kind() == speculative::DraftKind::mtp;
  Run run;
  Status st = speculative::prefill(f, sampler, s);
  const auto t0 = Clock::now();
  while (st.ok() && static_cast<int>(s.generated.size()) < n) {
    if (!drafter) {
      st = speculative::classic_step(f, sampler, s, static_cast<int>(s.generated.size()) + 1 < n);
      ++run.steps;
      continue;
    }
    auto r = speculative::speculative_round(f, *drafter, sampler, s, k);
    if (!r.ok()) {
      st = r.status();
      break;
    }
    ++run.rounds;
    run.drafted += r->drafted;
    run.accepted += r->accepted;
    run.round_ms += r->draft_ms + r->verify_ms + r->overhead_ms;
    run.verify_ms += r->verify_ms;
  }
  run.decode_ms = ms_since(t0);
  if (drafter) drafter->reset();
  kv.release(s.seq);
  if (!st.ok()) return st;
  s.generated.resize(n);
  run.tokens = s.generated;
  return run;
}

}  // namespace

int run_spec_bench(SpecBenchOptions o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem bench: %s\n", s.to_string().c_str());
    return 1;
  };
  const int64_t capacity = o.prompt_tokens + o.decode + 32;
  o.drafter.max_tokens = capacity;
  // Every K of the sweep is measured; the drafter is loaded (and logged) with the first.
  o.drafter.block_size = o.k_min;
  o.drafter.block_size_rule =
      "the first K of the sweep " + std::to_string(o.k_min) + ".." + std::to_string(o.k_max);
  runtime::OpenOptions open{o.model_dir, o.drafter, o.threads};
  open.device = o.device;
  open.weights = o.weights;
  auto opened = runtime::open_model(open);
  if (!opened.ok()) return fail(opened.status());
  const model::Model& m = *opened->model;
  ThreadPool& pool = *opened->pool;
  const runtime::LoadedDrafter* drafter = &opened->drafter;
  auto prompts = load_prompts(o, m, opened->text.tokenizer);
  if (!prompts.ok()) return fail(prompts.status());
  auto kv = model::KvCache::create(m.config(), model::KvCache::options_for_tokens(capacity));
  if (!kv.ok()) return fail(kv.status());
  // bench takes no --gemm: TANDEM_GEMM's pin or the invariant kernel.
  auto gemm = resolve_gemm_option("");
  if (!gemm.ok()) return fail(gemm.status());
  model::Forward f(m, *kv, &pool);
  f.set_gemm_mode(gemm->mode);
  drafter->drafter->set_gemm_mode(gemm->mode);
  sampling::SamplingParams params;
  params.temperature = o.temperature;
  params.seed = o.seed.value_or(kBenchSeed);

  // Classic baseline.
  std::vector<Run> classic;
  double classic_ms = 0;
  int64_t classic_steps = 0;
  for (const auto& p : *prompts) {
    auto r = decode(f, *kv, nullptr, 0, p, params, o.decode);
    if (!r.ok()) return fail(r.status());
    classic_ms += r->decode_ms;
    classic_steps += r->steps;
    classic.push_back(std::move(*r));
  }
  const double step_ms = classic_ms / static_cast<double>(classic_steps);
  const double classic_tps = 1000.0 / step_ms;
  std::printf(
      "model %s, drafter %s, %zu prompts x %d tokens, %d new tokens each, temperature %.2f, seed %llu, %d "
      "threads\n",
      o.model_dir.c_str(), drafter->drafter->describe().c_str(), prompts->size(), o.prompt_tokens, o.decode,
      o.temperature, static_cast<unsigned long long>(params.seed), pool.size());
  std::printf("classic: %.2f tok/s (%.3f ms per decode step)\n", classic_tps, step_ms);
  std::printf("%3s %10s %8s %11s %13s %10s %14s %15s %10s %s\n", "K", "tok/s", "speedup", "acceptance",
              "mean_accepted", "round_ms", "round/classic", "verify/classic", "output", "probe");
  bool all_identical = true;
  for (int k = o.k_min; k <= o.k_max; ++k) {
    speculative::ExactnessGate gate = opened->gate(allow_inexact_from_env(), *gemm);
    const speculative::GateDecision& d = gate.decide(k);
    gemm->mode = d.gemm;  // a switch sticks for the later K, as for the forwards
    f.set_gemm_mode(d.gemm);
    drafter->drafter->set_gemm_mode(d.gemm);
    double ms = 0, round_ms = 0, verify_ms = 0;
    int64_t rounds = 0, drafted = 0, accepted = 0, tokens = 0;
    bool identical = true;
    for (size_t i = 0; i < prompts->size(); ++i) {
      auto r = decode(f, *kv, drafter->drafter.get(), k, (*prompts)[i], params, o.decode);
      if (!r.ok()) return fail(r.status());
      ms += r->decode_ms;
      round_ms += r->round_ms;
      verify_ms += r->verify_ms;
      rounds += r->rounds;
      drafted += r->drafted;
      accepted += r->accepted;
      tokens += static_cast<int64_t>(r->tokens.size()) - 1;  // the first token comes from the prefill
      identical = identical && r->tokens == classic[i].tokens;
    }
    all_identical = all_identical && identical;
    const double tps = 1000.0 * static_cast<double>(tokens) / ms;
    const double mean_round = round_ms / static_cast<double>(rounds);
    std::printf("%3d %10.2f %7.2fx %11.3f %13.2f %10.3f %14.2f %15.2f %10s %s\n", k, tps, tps / classic_tps,
                static_cast<double>(accepted) / static_cast<double>(drafted),
                static_cast<double>(accepted) / static_cast<double>(rounds), mean_round, mean_round / step_ms,
                verify_ms / static_cast<double>(rounds) / step_ms, identical ? "identical" : "DIFFERS",
                d.exact ? "exact" : "inexact");
  }
  if (!all_identical) {
    std::fprintf(stderr, "tandem bench: a speculative stream differs from the classic one\n");
    return 4;
  }
  return 0;
}

}  // namespace tandem::app
