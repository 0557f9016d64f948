// Speculative decoding emits exactly the classic stream, byte for byte, for
// every fixture family, K = 2..8, greedy and seeded sampling: with a drafter
// that is a copy of the target (acceptance must be exactly 1.0, which also
// proves the verify rows are bitwise equal to single-token decode), with an
// unrelated random drafter (acceptance near 0), and with a random MTP head.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "kernels/ops.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "random_mtp_head.h"
#include "speculative/draft_model.h"
#include "speculative/mtp.h"
#include "speculative/sequence.h"

namespace tandem::speculative {
namespace {

constexpr int kNewTokens = 64;

std::string fixture_dir(const std::string& name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/fixtures/models/" + name;
}

struct Target {
  std::unique_ptr<model::Model> model;
  model::KvCache kv;
  std::unique_ptr<model::Forward> forward;
};

std::unique_ptr<Target> load_target(const std::string& name, int64_t kv_tokens = 512) {
  auto t = std::make_unique<Target>();
  auto m = model::Model::load(fixture_dir(name));
  if (!m.ok()) {
    ADD_FAILURE() << m.status().to_string();
    return nullptr;
  }
  t->model = std::move(*m);
  t->kv = std::move(
      *model::KvCache::create(t->model->config(), model::KvCache::options_for_tokens(kv_tokens, 16)));
  t->forward = std::make_unique<model::Forward>(*t->model, t->kv, nullptr, 64);
  return t;
}

std::vector<int32_t> prompt_for(int64_t vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < 12; ++i) p.push_back(static_cast<int32_t>((37 * i + 11) % vocab));
  return p;
}

SequenceState start(Target& t, const sampling::SamplingParams& params) {
  SequenceState s;
  s.seq = t.kv.create_sequence();
  s.prompt = prompt_for(t.model->config().vocab_size);
  s.params = params;
  return s;
}

std::vector<int32_t> classic(Target& t, const sampling::SamplingParams& params,
                             size_t new_tokens = kNewTokens) {
  sampling::Sampler sampler;
  SequenceState s = start(t, params);
  EXPECT_TRUE(prefill(*t.forward, sampler, s).ok());
  while (s.generated.size() < new_tokens) EXPECT_TRUE(classic_step(*t.forward, sampler, s).ok());
  t.kv.release(s.seq);
  return s.generated;
}

struct SpecRun {
  std::vector<int32_t> tokens;
  int64_t drafted = 0, accepted = 0;
};

SpecRun speculative(Target& t, Drafter& drafter, const sampling::SamplingParams& params, int k) {
  sampling::Sampler sampler;
  SequenceState s = start(t, params);
  s.keep_hidden = drafter.kind() == DraftKind::mtp;
  SpecRun run;
  EXPECT_TRUE(prefill(*t.forward, sampler, s).ok());
  while (s.generated.size() < kNewTokens) {
    auto stats = speculative_round(*t.forward, drafter, sampler, s, k);
    if (!stats.ok()) {
      ADD_FAILURE() << stats.status().to_string();
      break;
    }
    run.drafted += stats->drafted;
    run.accepted += stats->accepted;
  }
  drafter.reset();
  t.kv.release(s.seq);
  s.generated.resize(kNewTokens);
  run.tokens = s.generated;
  return run;
}

std::vector<sampling::SamplingParams> sampling_cases() {
  std::vector<sampling::SamplingParams> cases;
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  cases.push_back(greedy);
  for (uint64_t seed : {1u, 2u, 3u}) {
    sampling::SamplingParams p;
    p.temperature = 0.8f;
    p.top_p = 0.9f;
    p.seed = seed;
    cases.push_back(p);
  }
  return cases;
}

struct Pairing {
  const char* target;
  const char* unrelated;          // a different random model with the same vocabulary size
  bool mtp_head = true;           // also draft with a random MTP head (none exists for gemma4_text)
  bool bf16_activations = false;  // ADR 0082: bf16 weights x bf16-rounded activations (every model here)
};

// Selects Activations::bf16 for a scope (the models, drafters and heads built in it keep it).
struct Bf16Activations {
  explicit Bf16Activations(bool on) {
    if (on) kernels::select_activations(kernels::Activations::bf16);
  }
  ~Bf16Activations() { kernels::select_activations(kernels::Activations::f32); }
};

class SpecEqualsClassic : public ::testing::TestWithParam<Pairing> {};

TEST_P(SpecEqualsClassic, ForEveryBlockSizeAndSampling) {
  const Pairing pairing = GetParam();
  const Bf16Activations mode(pairing.bf16_activations);
  auto target = load_target(pairing.target);
  ASSERT_NE(target, nullptr);
  auto self = DraftModelDrafter::load(fixture_dir(pairing.target), nullptr, 512);
  auto other = DraftModelDrafter::load(fixture_dir(pairing.unrelated), nullptr, 512);
  ASSERT_TRUE(self.ok()) << self.status().to_string();
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  Expected<std::unique_ptr<MtpDrafter>> mtp = failed_precondition("no MTP head");
  if (pairing.mtp_head) {
    mtp = MtpDrafter::load(testing::write_random_mtp_head(target->model->config(), pairing.target),
                           *target->model, nullptr, 512);
    ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  }
  ASSERT_TRUE(DraftModelDrafter::check_compatible(fixture_dir(pairing.target), target->model->config(),
                                                  fixture_dir(pairing.unrelated), (*other)->model().config())
                  .ok());
  int64_t other_drafted = 0, other_accepted = 0;
  for (const auto& params : sampling_cases()) {
    const std::vector<int32_t> expected = classic(*target, params);
    for (int k = 2; k <= 8; ++k) {
      SCOPED_TRACE("K=" + std::to_string(k) + " temperature=" + std::to_string(params.temperature) +
                   " seed=" + std::to_string(params.seed));
      SpecRun with_self = speculative(*target, **self, params, k);
      EXPECT_EQ(with_self.tokens, expected);
      EXPECT_GT(with_self.drafted, 0);
      EXPECT_EQ(with_self.accepted, with_self.drafted) << "a copy of the target must agree at every position";
      SpecRun with_other = speculative(*target, **other, params, k);
      EXPECT_EQ(with_other.tokens, expected);
      other_drafted += with_other.drafted;
      other_accepted += with_other.accepted;
      if (!pairing.mtp_head) continue;
      SpecRun with_mtp = speculative(*target, **mtp, params, k);
      EXPECT_EQ(with_mtp.tokens, expected) << "with a (random) MTP head";
      EXPECT_GT(with_mtp.drafted, 0);
    }
  }
  EXPECT_LT(static_cast<double>(other_accepted) / static_cast<double>(other_drafted), 0.35)
      << "an unrelated random drafter should rarely agree";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpecEqualsClassic,
                         ::testing::Values(Pairing{"llama_default_bf16", "qwen2_bias_f16"},
                                           Pairing{"llama3_rope_v5_f32", "llama_default_bf16"},
                                           Pairing{"llama_linear_f16_tied", "qwen3_qknorm_f16"},
                                           Pairing{"llama_sharded_bf16", "mistral_sliding_bf16"},
                                           Pairing{"mistral_sliding_bf16", "llama_sharded_bf16"},
                                           Pairing{"qwen2_bias_bf16_tied", "llama_linear_f16_tied"},
                                           Pairing{"qwen2_bias_f16", "qwen3_qknorm_bf16_tied"},
                                           Pairing{"qwen3_qknorm_bf16_tied", "llama3_rope_v5_f32"},
                                           Pairing{"qwen3_qknorm_f16", "qwen2_bias_bf16_tied"},
                                           Pairing{"qwen3_moe_bf16", "mixtral_sliding_bf16"},
                                           Pairing{"qwen2_moe_shared_bf16", "qwen3_moe_dense0_f16"},
                                           Pairing{"mixtral_sliding_bf16", "qwen3_moe_dense0_f16"},
                                           Pairing{"gemma2_softcap_bf16", "gemma3_text_bf16"},
                                           Pairing{"gemma3_text_bf16", "gemma2_softcap_bf16"},
                                           Pairing{"gemma4_text_bf16", "gemma4_moe_bf16", false},
                                           Pairing{"gemma4_moe_bf16", "gemma4_mm_textonly_f32", false},
                                           Pairing{"gemma4_mm_textonly_f32", "gemma4_text_bf16", false}),
                         [](const auto& info) { return std::string(info.param.target); });
INSTANTIATE_TEST_SUITE_P(Bf16Activations, SpecEqualsClassic,
                         ::testing::Values(Pairing{"llama_default_bf16", "qwen2_bias_f16", true, true},
                                           Pairing{"qwen3_moe_bf16", "mixtral_sliding_bf16", true, true},
                                           Pairing{"gemma2_softcap_bf16", "gemma3_text_bf16", true, true}),
                         [](const auto& info) { return std::string(info.param.target); });

// logit_bias false (kNeverProduced) under speculation: with every token the classic greedy stream
// produced banned, speculative decoding with a copy of the target and with an unrelated drafter
// still gives exactly the classic stream, greedy and sampled, and it holds none of the banned tokens.
TEST(SpecEqualsClassic, WithBannedTokens) {
  auto target = load_target("llama_default_bf16");
  ASSERT_NE(target, nullptr);
  auto self = DraftModelDrafter::load(fixture_dir("llama_default_bf16"), nullptr, 512);
  auto other = DraftModelDrafter::load(fixture_dir("qwen2_bias_f16"), nullptr, 512);
  ASSERT_TRUE(self.ok()) << self.status().to_string();
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> free_run = classic(*target, greedy);
  for (auto params : sampling_cases()) {
    for (int32_t t : free_run) params.logit_bias.emplace_back(t, sampling::kNeverProduced);
    const std::vector<int32_t> expected = classic(*target, params);
    for (int32_t t : expected)
      EXPECT_EQ(std::count(free_run.begin(), free_run.end(), t), 0) << "banned token " << t;
    for (int k : {2, 5}) {
      SCOPED_TRACE("K=" + std::to_string(k) + " temperature=" + std::to_string(params.temperature));
      EXPECT_EQ(speculative(*target, **self, params, k).tokens, expected);
      EXPECT_EQ(speculative(*target, **other, params, k).tokens, expected);
    }
  }
}

// MTP layers stored inside the target's checkpoint (MiMo's model.mtp_layers.0,
// ADR 0027): the in-checkpoint drafter gives exactly the classic stream too.
TEST(SpecEqualsClassic, WithTheTargetsOwnMtpLayers) {
  auto target = load_target("mimo_mtp_bf16");
  ASSERT_NE(target, nullptr);
  auto mtp = MtpDrafter::load_embedded(*target->model, nullptr, 512);
  ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  EXPECT_EQ((*mtp)->layout().block_prefix, "model.mtp_layers.0.");
  int64_t drafted = 0, accepted = 0;
  for (const auto& params : sampling_cases()) {
    const std::vector<int32_t> expected = classic(*target, params);
    for (int k = 2; k <= 8; ++k) {
      SCOPED_TRACE("K=" + std::to_string(k) + " temperature=" + std::to_string(params.temperature) +
                   " seed=" + std::to_string(params.seed));
      SpecRun run = speculative(*target, **mtp, params, k);
      EXPECT_EQ(run.tokens, expected);
      EXPECT_GT(run.drafted, 0);
      drafted += run.drafted;
      accepted += run.accepted;
    }
  }
  EXPECT_GT(drafted, 0);
  EXPECT_LE(accepted, drafted);
}

// Near the end of the caches a round shrinks its block to the room left in
// the target's cache and in the drafter's, and where no draft fits it is a
// classic step: with the target's cache (64 positions) run full, every K
// emits exactly the classic tokens and never fails with "does not fit" —
// drafters whose cache holds as much as the target's (a copy of the target,
// a random MTP head) and one whose cache holds only half.
TEST(SpecNearCacheEnd, RoundsShrinkToTheRoomLeftInBothCaches) {
  constexpr int64_t kPositions = 64;  // the target's cache: 4 blocks of 16
  const char* name = "llama_default_bf16";
  auto target = load_target(name, kPositions);
  ASSERT_NE(target, nullptr);
  ASSERT_EQ(target->kv.num_blocks() * target->kv.tokens_per_block(), kPositions);
  auto copy = DraftModelDrafter::load(fixture_dir(name), nullptr, kPositions);
  auto half = DraftModelDrafter::load(fixture_dir(name), nullptr, kPositions / 2);
  auto mtp = MtpDrafter::load(testing::write_random_mtp_head(target->model->config(), "near_end"),
                              *target->model, nullptr, kPositions / 2);
  ASSERT_TRUE(copy.ok() && half.ok() && mtp.ok());
  ASSERT_EQ((*copy)->position_limit(), kPositions);
  ASSERT_EQ((*half)->position_limit(), kPositions / 2);
  ASSERT_GE((*mtp)->position_limit(), kPositions);
  // Classic decoding feeds positions 0 .. 63: the 12-token prompt and 52 generated tokens, so
  // it emits 53 tokens before the cache is full.
  const size_t fits = kPositions - prompt_for(target->model->config().vocab_size).size() + 1;
  for (const auto& params : sampling_cases()) {
    const std::vector<int32_t> expected = classic(*target, params, fits);
    for (int k : {2, 3, 4, 8, 16}) {
      for (Drafter* drafter : std::initializer_list<Drafter*>{copy->get(), half->get(), mtp->get()}) {
        SCOPED_TRACE(drafter->describe() + " limit " + std::to_string(drafter->position_limit()) +
                     " K=" + std::to_string(k) + " temperature=" + std::to_string(params.temperature) +
                     " seed=" + std::to_string(params.seed));
        sampling::Sampler sampler;
        SequenceState s = start(*target, params);
        s.keep_hidden = drafter->kind() == DraftKind::mtp;
        ASSERT_TRUE(prefill(*target->forward, sampler, s).ok());
        int64_t drafted = 0, accepted = 0;
        while (s.generated.size() < fits) {
          const int64_t L = s.pending_position();
          const int64_t room = std::min(kPositions, drafter->position_limit());
          auto stats = speculative_round(*target->forward, *drafter, sampler, s, k);
          ASSERT_TRUE(stats.ok()) << "at position " << L << ": " << stats.status().to_string();
          EXPECT_EQ(stats->block_size, std::clamp<int64_t>(room - L, 1, k)) << "at position " << L;
          EXPECT_EQ(stats->drafted, stats->block_size - 1);
          EXPECT_LE(target->kv.length(s.seq), kPositions);
          drafted += stats->drafted;
          accepted += stats->accepted;
        }
        EXPECT_EQ(s.generated, expected) << "exactly the classic tokens, none past the cache";
        EXPECT_GT(drafted, 0);
        if (drafter != mtp->get()) {
          EXPECT_EQ(accepted, drafted) << "a copy of the target accepts everything";
        }
        drafter->reset();
        target->kv.release(s.seq);
      }
    }
  }
}

TEST(DraftCompatibility, VocabularySizeMismatchNamesBoth) {
  auto a = model::load_config(fixture_dir("llama_default_bf16"));
  auto b = model::load_config(fixture_dir("llama3_rope_headdim_bf16"));
  ASSERT_TRUE(a.ok() && b.ok());
  Status s = DraftModelDrafter::check_compatible("T", *a, "D", *b);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("320"), std::string::npos);
  EXPECT_NE(s.message().find("256"), std::string::npos);
}

TEST(DraftKind, ParseAndDetect) {
  EXPECT_EQ(parse_draft_kind(" MTP ").value(), DraftKind::mtp);
  auto bad = parse_draft_kind("eagle");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("draft, mtp"), std::string::npos);
  EXPECT_EQ(detect_draft_kind(fixture_dir("qwen2_bias_f16")).value(), DraftKind::draft);
  // A full checkpoint declaring MTP layers inside it (MiMo) is detected as mtp.
  EXPECT_EQ(detect_draft_kind(fixture_dir("mimo_mtp_bf16")).value(), DraftKind::mtp);
  // Zero layers: an ordinary causal LM, a draft model.
  auto none = model::read_json_file(fixture_dir("qwen2_bias_f16") + "/config.json");
  ASSERT_TRUE(none.ok());
  (*none)["num_nextn_predict_layers"] = 0;
  EXPECT_EQ(detect_draft_kind(*none, "config.json").value(), DraftKind::draft);
  EXPECT_FALSE(detect_draft_kind("/nonexistent").ok());
}

}  // namespace
}  // namespace tandem::speculative
