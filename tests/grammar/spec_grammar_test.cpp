// Speculative decoding under a grammar constraint emits exactly the tokens
// classic decoding emits — with the bundled draft model and the bundled MTP
// head, K = 2 and 4, greedy and seeded — because the mask is a function of the
// prefix only and enters the same sampler on every path (classic steps,
// verify rows, drafts). Compared with ==, over 96 tokens (past the end token
// too: there the mask allows only end tokens, on every path alike).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "grammar/json_schema.h"
#include "grammar/token_constraint.h"
#include "model/forward.h"
#include "model/model.h"
#include "speculative/draft_model.h"
#include "speculative/mtp.h"
#include "speculative/sequence.h"
#include "tokenizer/tokenizer.h"

namespace tandem::grammar {
namespace {

using speculative::Drafter;

std::string models_dir(const std::string& name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/models/" + name;
}

constexpr size_t kTokens = 96;

struct Bundle {
  std::unique_ptr<model::Model> target;
  model::KvCache kv;
  std::unique_ptr<model::Forward> forward;
  ThreadPool pool{2};
  std::optional<tok::Tokenizer> tokenizer;
  std::shared_ptr<const TokenTrie> trie;
  std::shared_ptr<const Grammar> grammar;

  Bundle() {
    auto t = model::Model::load(models_dir("tandem-target"));
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    target = std::move(*t);
    kv = std::move(*model::KvCache::create(target->config(), model::KvCache::options_for_tokens(1024)));
    forward = std::make_unique<model::Forward>(*target, kv, &pool, 128);
    auto tk = tok::Tokenizer::from_file(models_dir("tandem-target") + "/tokenizer.json");
    EXPECT_TRUE(tk.ok());
    tokenizer = std::move(*tk);
    trie = std::make_shared<const TokenTrie>(TokenTrie::from_tokenizer(*tokenizer));
    auto gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
      "type": "object",
      "properties": {"name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"},
                     "tags": {"type": "array", "items": {"enum": ["sea", "ship", "whale"]}, "maxItems": 3}},
      "required": ["name", "age", "tags"], "additionalProperties": false})"));
    EXPECT_TRUE(gbnf.ok());
    auto g = parse_gbnf(*gbnf);
    EXPECT_TRUE(g.ok());
    grammar = std::make_shared<const Grammar>(std::move(*g));
  }

  std::vector<int32_t> run(Drafter* drafter, sampling::SamplingParams params, int k) {
    params.constraint = std::make_shared<GrammarConstraint>(grammar, trie, std::vector<int32_t>{0, 2});
    sampling::Sampler sampler;
    speculative::SequenceState s;
    s.seq = kv.create_sequence();
    s.prompt = tokenizer->encode(
        "<|im_start|>user\nTell me about the captain.<|im_end|>\n<|im_start|>assistant\n", false);
    s.params = params;
    s.keep_hidden = drafter && drafter->kind() == speculative::DraftKind::mtp;
    EXPECT_TRUE(speculative::prefill(*forward, sampler, s).ok());
    while (s.generated.size() < kTokens) {
      if (!drafter) {
        EXPECT_TRUE(speculative::classic_step(*forward, sampler, s).ok());
        continue;
      }
      auto st = speculative::speculative_round(*forward, *drafter, sampler, s, k);
      EXPECT_TRUE(st.ok()) << st.status().to_string();
      if (!st.ok()) break;
      drafted += st->drafted;
      accepted += st->accepted;
    }
    if (drafter) drafter->reset();
    kv.release(s.seq);
    s.generated.resize(kTokens);
    return s.generated;
  }

  // Generates under `g` (end tokens 0 and 2) until max_tokens or an error: the tokens and the
  // error (OK when none came).
  std::pair<std::vector<int32_t>, Status> run_to_error(Drafter* drafter, std::shared_ptr<const Grammar> g,
                                                       sampling::SamplingParams params, int k,
                                                       size_t max_tokens) {
    params.constraint = std::make_shared<GrammarConstraint>(g, trie, std::vector<int32_t>{0, 2});
    sampling::Sampler sampler;
    speculative::SequenceState s;
    s.seq = kv.create_sequence();
    s.prompt =
        tokenizer->encode("<|im_start|>user\nWhere is the whale?<|im_end|>\n<|im_start|>assistant\n", false);
    s.params = params;
    s.keep_hidden = drafter && drafter->kind() == speculative::DraftKind::mtp;
    Status error = speculative::prefill(*forward, sampler, s);
    while (error.ok() && s.generated.size() < max_tokens) {
      if (!drafter) {
        error = speculative::classic_step(*forward, sampler, s);
        continue;
      }
      auto st = speculative::speculative_round(*forward, *drafter, sampler, s, k);
      if (!st.ok()) {
        ADD_FAILURE() << st.status().to_string();
        break;
      }
      error = st->dead_end;
    }
    if (drafter) drafter->reset();
    kv.release(s.seq);
    return {s.generated, error};
  }

  int64_t drafted = 0, accepted = 0;
};

TEST(SpeculativeUnderGrammar, EqualsClassicWithBothDrafters) {
  Bundle b;
  auto mtp = speculative::MtpDrafter::load(models_dir("tandem-mtp"), *b.target, &b.pool, 1024);
  auto draft = speculative::DraftModelDrafter::load(models_dir("tandem-draft"), &b.pool, 1024);
  ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  ASSERT_TRUE(draft.ok()) << draft.status().to_string();
  for (auto [temperature, seed] : {std::pair{0.0f, 1ull}, std::pair{0.9f, 11ull}}) {
    sampling::SamplingParams params;
    params.temperature = temperature;
    params.seed = seed;
    const std::vector<int32_t> expected = b.run(nullptr, params, 0);
    // The constraint was in force: a JSON object, then only end tokens.
    const std::string text = b.tokenizer->decode(expected, true);
    EXPECT_EQ(text.front(), '{') << text;
    auto check = std::make_shared<GrammarConstraint>(b.grammar, b.trie, std::vector<int32_t>{0, 2});
    const auto first_end =
        std::find_if(expected.begin(), expected.end(), [](int32_t t) { return t == 0 || t == 2; });
    const std::vector<int32_t> body(expected.begin(), first_end);
    EXPECT_NE(check->state_after(body), ByteAutomaton::kDead) << text;
    if (first_end != expected.end()) EXPECT_TRUE(check->accepts(body)) << text;
    for (Drafter* d : {static_cast<Drafter*>(mtp->get()), static_cast<Drafter*>(draft->get())}) {
      b.drafted = b.accepted = 0;
      for (int k : {2, 4}) {
        SCOPED_TRACE(d->describe() + " K=" + std::to_string(k) + " T=" + std::to_string(temperature));
        EXPECT_EQ(b.run(d, params, k), expected);
      }
      EXPECT_GT(b.accepted, 0) << d->describe() << " never had a draft accepted";
    }
  }
}

// A JSON schema whose object ends the reply, with the end tokens banned by logit_bias (what a
// client does to "ignore EOS"): once the object is complete the grammar allows only the end
// tokens, so that position has no token. Classic decoding stops there with an error after the
// object — before the change it emitted token 0 there and went on — and both drafters, at K = 2
// and 4, produce the same tokens and the same error.
TEST(SpeculativeUnderGrammar, ADeadEndIsTheSameErrorWithEveryDrafter) {
  Bundle b;
  auto mtp = speculative::MtpDrafter::load(models_dir("tandem-mtp"), *b.target, &b.pool, 1024);
  auto draft = speculative::DraftModelDrafter::load(models_dir("tandem-draft"), &b.pool, 1024);
  ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  ASSERT_TRUE(draft.ok()) << draft.status().to_string();
  auto gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
      "type": "object", "properties": {"kind": {"enum": ["sea", "ship", "whale"]}},
      "required": ["kind"], "additionalProperties": false})"));
  ASSERT_TRUE(gbnf.ok());
  auto parsed = parse_gbnf(*gbnf);
  ASSERT_TRUE(parsed.ok());
  auto g = std::make_shared<const Grammar>(std::move(*parsed));
  for (auto [temperature, seed] : {std::pair{0.0f, 3ull}, std::pair{0.9f, 17ull}}) {
    SCOPED_TRACE("T=" + std::to_string(temperature));
    sampling::SamplingParams params;
    params.temperature = temperature;
    params.seed = seed;
    params.logit_bias = {{0, sampling::kNeverProduced}, {2, sampling::kNeverProduced}};
    const auto [expected, error] = b.run_to_error(nullptr, g, params, 0, 200);
    ASSERT_FALSE(error.ok()) << "the object never completed: " << b.tokenizer->decode(expected, true);
    EXPECT_EQ(error.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(error.message(), "no token is allowed after " + std::to_string(expected.size()) +
                                   " generated tokens: the grammar's next tokens 0, 2 are all banned by "
                                   "logit_bias");
    const std::string text = b.tokenizer->decode(expected, true);
    EXPECT_EQ(text.front(), '{') << text;
    EXPECT_EQ(text.back(), '}') << text;
    EXPECT_TRUE(GrammarConstraint(g, b.trie, {0, 2}).accepts(expected)) << text;
    for (Drafter* d : {static_cast<Drafter*>(mtp->get()), static_cast<Drafter*>(draft->get())}) {
      for (int k : {2, 4}) {
        SCOPED_TRACE(d->describe() + " K=" + std::to_string(k));
        const auto [tokens, spec_error] = b.run_to_error(d, g, params, k, 200);
        EXPECT_EQ(tokens, expected);
        EXPECT_EQ(spec_error.to_string(), error.to_string());
      }
    }
  }
}

}  // namespace
}  // namespace tandem::grammar
