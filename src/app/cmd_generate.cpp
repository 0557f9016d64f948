// `tandem generate -m DIR --tokens 1,2,3 -n 32`: greedy generation from token
// ids (until the tokenizer is wired in). Prints the generated ids, comma
// separated, on stdout; load and timing lines go to stderr.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "model/forward.h"

namespace tandem::app {
namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string tokens;
  int max_tokens = 32;
  int threads = 1;
  bool ignore_eos = false;
};

Expected<std::vector<int32_t>> parse_token_list(const std::string& text) {
  std::vector<int32_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      out.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return invalid_argument("--tokens: \"" + item + "\" is not a non-negative integer token id");
    }
  }
  if (out.empty()) return invalid_argument("--tokens: no token ids given");
  return out;
}

int run_generate(const GenerateOptions& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem generate: %s\n", s.to_string().c_str());
    return 1;
  };
  auto prompt = parse_token_list(o.tokens);
  if (!prompt.ok()) return fail(prompt.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto loaded = model::Model::load(o.model_dir);
  if (!loaded.ok()) return fail(loaded.status());
  const model::Model& m = **loaded;
  const int64_t total = static_cast<int64_t>(prompt->size()) + o.max_tokens;
  auto kv = model::KvCache::create(m.config(), model::KvCache::options_for_tokens(total));
  if (!kv.ok()) return fail(kv.status());
  std::unique_ptr<ThreadPool> pool = o.threads > 1 ? std::make_unique<ThreadPool>(o.threads) : nullptr;
  model::Forward fw(m, *kv, pool.get());
  const auto t1 = std::chrono::steady_clock::now();

  model::SequenceId seq = kv->create_sequence();
  model::SequenceStep step{seq, *prompt, 0, model::LogitRows::last};
  auto out = fw.run({&step, 1});
  if (!out.ok()) return fail(out.status());
  const auto t2 = std::chrono::steady_clock::now();
  std::vector<int32_t> generated;
  int32_t next = 0;
  while (static_cast<int>(generated.size()) < o.max_tokens) {
    next = kernels::argmax(out->logits_row(0), m.config().vocab_size);
    generated.push_back(next);
    std::printf("%s%d", generated.size() > 1 ? "," : "", next);
    std::fflush(stdout);
    const auto& eos = m.config().eos_token_ids;
    if (!o.ignore_eos && std::find(eos.begin(), eos.end(), next) != eos.end()) break;
    if (static_cast<int>(generated.size()) == o.max_tokens) break;
    model::SequenceStep decode{seq, {&next, 1}, kv->length(seq), model::LogitRows::last};
    out = fw.run({&decode, 1});
    if (!out.ok()) return fail(out.status());
  }
  std::printf("\n");
  const auto t3 = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::fprintf(stderr, "load %.2f s, prefill %zu tokens %.3f s, decode %zu tokens %.3f s (%.1f tok/s)\n",
               secs(t0, t1), prompt->size(), secs(t1, t2), generated.size(), secs(t2, t3),
               generated.size() > 1 ? (generated.size() - 1) / secs(t2, t3) : 0.0);
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* sub =
      app.add_subcommand("generate", "Greedy generation from token ids (tokenizer not wired in yet)");
  sub->add_option("-m,--model", o->model_dir, "Hugging Face model directory")->required();
  sub->add_option("--tokens", o->tokens, "Prompt token ids, comma separated (e.g. 1,2,3)")->required();
  sub->add_option("-n,--n-predict", o->max_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  sub->add_option("-t,--threads", o->threads, "Kernel threads")->check(CLI::Range(1, 1024));
  sub->add_flag("--ignore-eos", o->ignore_eos, "Keep generating after an end-of-sequence token");
  return {sub, [o] { return run_generate(*o); }};
}

}  // namespace tandem::app
