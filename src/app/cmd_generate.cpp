// `tandem generate`: one completion from the command line, classic or
// speculative (-md), with the same seeded sampler as the server.
//   tandem generate -m DIR [-md DIR] [--draft-block-size K] -p TEXT [--chat] -n N
//                   [--temp T --top-k K --top-p P --min-p P --seed S] [--stats] [--device D]
//                   [-l ID+BIAS ...] [--grammar GBNF | --grammar-file FILE]
//   tandem generate -m DIR --tokens 1,2,3 -n 32      (token ids in and out)
// Text goes to stdout as it is generated; --stats adds a summary on stderr.
// A position where the grammar, -l and the rest leave no token ends the run
// with that message on stderr and exit 1, after the text generated before it.
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "common_options.h"
#include "core/log.h"
#include "drafter_setup.h"
#include "environment.h"
#include "grammar/grammar.h"
#include "grammar/token_constraint.h"
#include "model/forward.h"
#include "runtime/opened_model.h"
#include "serve_grammar.h"
#include "speculative/exactness.h"
#include "speculative/sequence.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/streaming.h"

namespace tandem::app {
namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string weights;  // --weights
  DrafterOptions drafter;
  std::string prompt, tokens;
  bool chat = false;
  int max_tokens = 128;
  int threads = 0;
  bool ignore_eos = false;
  bool stats = false;
  std::string gemm;
  std::string device;
  sampling::SamplingParams sampling;
  std::optional<uint64_t> seed;         // empty: random (printed by --stats)
  std::vector<std::string> logit_bias;  // llama.cpp's -l TOKEN_ID(+/-)BIAS, e.g. 15043+1, 2-inf
  std::string grammar, grammar_file;    // GBNF (docs/grammar.md)
};

// llama.cpp's --logit-bias form: a token id, a sign, a number or "inf" (-inf bans the token).
Expected<std::pair<int32_t, float>> parse_logit_bias(const std::string& text) {
  const size_t sign = text.find_first_of("+-", 1);
  const std::string id = text.substr(0, sign);
  const bool digits =
      !id.empty() && id.size() <= 10 && id.find_first_not_of("0123456789") == std::string::npos;
  if (sign == std::string::npos || !digits || std::stoll(id) > INT32_MAX)
    return invalid_argument("--logit-bias: \"" + text +
                            "\" is not TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 2-inf)");
  try {
    size_t used = 0;
    const std::string value = text.substr(sign + 1);
    const float bias = std::stof(value, &used);
    if (used != value.size() || bias < 0) throw std::invalid_argument(value);
    return std::pair{static_cast<int32_t>(std::stoll(id)), text[sign] == '-' ? -bias : bias};
  } catch (const std::exception&) {
    return invalid_argument("--logit-bias: \"" + text + "\" has no number (or inf) after the sign");
  }
}

// -l and --grammar / --grammar-file into `params` (the grammar's end tokens are the stop ids).
Status add_constraints(const GenerateOptions& o, const runtime::TextSide& text,
                       sampling::SamplingParams& params) {
  for (const std::string& b : o.logit_bias) {
    TANDEM_ASSIGN_OR_RETURN(auto entry, parse_logit_bias(b));
    params.logit_bias.push_back(entry);
  }
  if (o.grammar.empty() && o.grammar_file.empty()) return Status::Ok();
  if (!o.grammar.empty() && !o.grammar_file.empty())
    return invalid_argument("--grammar and --grammar-file: give one of them");
  if (!text.tokenizer) return invalid_argument("--grammar needs the model's tokenizer.json");
  const bool from_file = !o.grammar_file.empty();
  auto parsed = compile_grammar_flag(from_file ? "--grammar-file" : "--grammar",
                                     from_file ? o.grammar_file : o.grammar, from_file, false);
  if (!parsed.ok()) return parsed.status();
  params.constraint = std::make_shared<grammar::GrammarConstraint>(
      std::make_shared<const grammar::Grammar>(std::move(*parsed)),
      std::make_shared<const grammar::TokenTrie>(grammar::TokenTrie::from_tokenizer(*text.tokenizer)),
      text.stop_tokens);
  return Status::Ok();
}

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

// The prompt's token ids; text prompts need the tokenizer (and --chat the
// template) runtime::open_model loaded: when absent, the error is the loader's.
Expected<std::vector<int32_t>> build_prompt(const GenerateOptions& o, const runtime::TextSide& text) {
  if (!o.tokens.empty()) return parse_token_list(o.tokens);
  if (!text.tokenizer) return tok::Tokenizer::from_file(o.model_dir + "/tokenizer.json").status();
  if (!o.chat) return text.tokenizer->encode(o.prompt, true);
  if (!text.chat_template)
    return tok::ChatTemplate::from_tokenizer_config(o.model_dir + "/tokenizer_config.json").status();
  tok::ChatRenderInput input;
  input.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", o.prompt}}});
  input.add_generation_prompt = true;
  TANDEM_ASSIGN_OR_RETURN(std::string rendered, text.chat_template->render(input));
  return text.tokenizer->encode(rendered, false);
}

int run_generate(GenerateOptions o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem generate: %s\n", s.to_string().c_str());
    return 1;
  };
  auto checked = check_startup(o.drafter, o.gemm);  // exit 2 on any usage error
  if (!checked.ok()) return usage_error("generate", checked.status());
  const speculative::GemmRequest gemm = *checked;
  auto weights = resolve_weights_option(o.weights);
  if (!weights.ok()) return usage_error("generate", weights.status());
  if (o.tokens.empty() && o.prompt.empty())
    return fail(invalid_argument("give a prompt with -p TEXT (or token ids with --tokens)"));
  runtime::OpenOptions open;
  open.model_dir = o.model_dir;
  open.threads = o.threads;
  open.device = resolve_device_option(o.device);
  open.weights = *weights;
  auto opened = runtime::open_model(open);  // the drafter comes once the prompt's length is known
  if (!opened.ok()) return fail(opened.status());
  const model::Model& m = *opened->model;
  auto prompt = build_prompt(o, opened->text);
  if (!prompt.ok()) return fail(prompt.status());
  if (Status s = add_constraints(o, opened->text, o.sampling); !s.ok()) return usage_error("generate", s);
  if (Status s = sampling::validate(o.sampling, static_cast<int32_t>(m.config().vocab_size)); !s.ok())
    return fail(s);
  const int64_t total = static_cast<int64_t>(prompt->size()) + o.max_tokens + 16;
  auto kv = model::KvCache::create(m.config(), model::KvCache::options_for_tokens(total));
  if (!kv.ok()) return fail(kv.status());
  o.drafter.max_tokens = total;
  if (Status s = runtime::open_drafter(*opened, o.drafter); !s.ok()) return fail(s);
  const runtime::LoadedDrafter* drafter = &opened->drafter;
  model::Forward forward(m, *kv, opened->pool.get(),
                         forward_chunk_rows(m.placement().kind == model::DeviceKind::cuda));

  std::optional<speculative::GateDecision> gate;
  if (drafter->drafter) gate = opened->gate(allow_inexact_from_env(), gemm).decide(drafter->block_size);
  // The mode the gate settled on (the requested one without a drafter).
  const kernels::GemmMode mode = gate ? gate->gemm : gemm.mode;
  forward.set_gemm_mode(mode);
  if (drafter->drafter) drafter->drafter->set_gemm_mode(mode);
  const bool speculate = gate && gate->allowed;

  sampling::Sampler sampler;
  speculative::SequenceState s;
  s.seq = kv->create_sequence();
  s.prompt = *prompt;
  s.params = o.sampling;
  s.params.seed = o.seed ? *o.seed : sampling::random_seed();
  s.keep_hidden = speculate && drafter->drafter->kind() == speculative::DraftKind::mtp;
  // The stop ids every front end stops on (runtime/text_side.h), generation_config.json's included.
  const std::vector<int32_t>& stops = opened->text.stop_tokens;

  std::optional<tok::StreamingDetokenizer> detok;
  if (o.tokens.empty() && opened->text.tokenizer) detok.emplace(*opened->text.tokenizer, true);
  size_t printed = 0;
  bool done = false;
  auto emit = [&] {
    while (!done && printed < s.generated.size()) {
      const int32_t t = s.generated[printed++];
      if (!o.ignore_eos && std::find(stops.begin(), stops.end(), t) != stops.end()) {
        done = true;
        break;
      }
      if (detok) {
        std::fputs(detok->push(t).c_str(), stdout);
      } else {
        std::printf("%s%d", printed > 1 ? "," : "", t);
      }
      if (static_cast<int>(printed) >= o.max_tokens) done = true;
    }
    std::fflush(stdout);
  };
  // The text so far stays on stdout, ended by a newline, and the reason goes to stderr.
  auto fail_after_output = [&](const Status& st) {
    if (detok) std::fputs(detok->flush().c_str(), stdout);
    std::printf("\n");
    std::fflush(stdout);
    return fail(st);
  };
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (Status st = speculative::prefill(forward, sampler, s); !st.ok()) return fail_after_output(st);
  const auto t1 = Clock::now();
  emit();
  int64_t rounds = 0, drafted = 0, accepted = 0;
  while (!done) {
    if (speculate) {
      auto r = speculative::speculative_round(forward, *drafter->drafter, sampler, s, drafter->block_size);
      if (!r.ok()) return fail_after_output(r.status());
      ++rounds;
      drafted += r->drafted;
      accepted += r->accepted;
      emit();  // the tokens before a dead end count, and may end the run first (a stop id)
      if (!done && !r->dead_end.ok()) return fail_after_output(r->dead_end);
      continue;
    }
    const bool more =
        static_cast<int64_t>(s.generated.size()) + 1 < o.max_tokens;  // queue it ahead (ADR 0090)
    if (Status st = speculative::classic_step(forward, sampler, s, more); !st.ok())
      return fail_after_output(st);
    emit();
  }
  if (detok) std::fputs(detok->flush().c_str(), stdout);
  std::printf("\n");
  const auto t2 = Clock::now();
  if (o.stats) {
    auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    const size_t n = std::min<size_t>(printed, static_cast<size_t>(o.max_tokens));
    std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tok/s)\n", prompt->size(), secs(t0, t1),
                 prompt->size() / secs(t0, t1));
    std::fprintf(stderr, "generated: %zu tokens in %.3f s (%.1f tok/s), seed %llu\n", n, secs(t1, t2),
                 n > 1 ? (n - 1) / secs(t1, t2) : 0.0, static_cast<unsigned long long>(s.params.seed));
    if (drafter->drafter) {
      std::fprintf(stderr, "drafter: %s, block size %d (%s)\n", drafter->drafter->describe().c_str(),
                   drafter->block_size, drafter->block_size_rule.c_str());
      std::fprintf(stderr, "exactness probe: %s — %s\n",
                   gate->exact ? "exact" : (gate->allowed ? "inexact, engaged anyway" : "declined"),
                   gate->decline_reason.value_or(gate->probe_reason).c_str());
      std::fprintf(stderr, "speculative rounds: %lld, acceptance rate %.3f, mean accepted length %.2f\n",
                   static_cast<long long>(rounds), drafted ? static_cast<double>(accepted) / drafted : 0.0,
                   rounds ? static_cast<double>(accepted) / rounds : 0.0);
    }
  }
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  o->sampling.temperature = 0.8f;
  CLI::App* sub =
      app.add_subcommand("generate", "Generate one completion (classic, or speculative with -md)");
  add_model_option(sub, o->model_dir);
  add_drafter_options(sub, o->drafter, true);
  sub->add_option("-p,--prompt", o->prompt, "Prompt text");
  sub->add_flag("--chat", o->chat, "Treat the prompt as a user message and apply the chat template");
  sub->add_option("--tokens", o->tokens, "Prompt token ids, comma separated (instead of -p); prints ids");
  sub->add_option("-n,--n-predict", o->max_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--temp", o->sampling.temperature, "Temperature (0 = greedy)")->capture_default_str();
  sub->add_option("--top-k", o->sampling.top_k, "Top-k (0 = off)");
  sub->add_option("--top-p", o->sampling.top_p, "Top-p (1 = off)");
  sub->add_option("--min-p", o->sampling.min_p, "Min-p (0 = off)");
  sub->add_option("--repeat-penalty", o->sampling.repetition_penalty, "Repetition penalty (1 = off)");
  sub->add_option("-s,--seed", o->seed, "Sampling seed (default: random, printed by --stats)");
  add_threads_option(sub, o->threads);
  add_gemm_option(sub, o->gemm);
  add_device_option(sub, o->device);
  add_weights_option(sub, o->weights);
  sub->add_flag("--ignore-eos", o->ignore_eos, "Keep generating after an end-of-sequence token");
  sub->add_option("-l,--logit-bias", o->logit_bias,
                  "TOKEN_ID+BIAS or TOKEN_ID-BIAS (-inf bans the token); repeatable");
  sub->add_option("--grammar", o->grammar, "GBNF grammar the output must follow");
  sub->add_option("--grammar-file", o->grammar_file, "File holding a GBNF grammar");
  sub->add_flag("--stats", o->stats, "Print speed, acceptance and the exactness verdict on stderr");
  return {sub, [o] { return run_generate(*o); }};
}

}  // namespace tandem::app
