// Batch invariance end to end, bitwise (memcmp): a row's logits do not depend
// on how the prompt was chunked, on the batch it rides in, on the thread
// count or on the Forward's row-chunk size. Also: rollback and admission.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "kernels/ops.h"
#include "model/forward.h"
#include "test_util.h"

namespace tandem::model {
namespace {

struct Rig {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<Forward> fw;
  std::unique_ptr<ThreadPool> pool;
  int64_t vocab() const { return model->config().vocab_size; }
};

Rig make_rig(const std::string& fixture, int threads = 1, int64_t max_rows = 128, int64_t kv_tokens = 1024) {
  Rig r;
  auto m = Model::load(testing::fixture_path(fixture));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  r.model = std::move(*m);
  auto kv = KvCache::create(r.model->config(), KvCache::options_for_tokens(kv_tokens, 16));
  EXPECT_TRUE(kv.ok());
  r.kv = std::make_unique<KvCache>(std::move(*kv));
  if (threads > 1) r.pool = std::make_unique<ThreadPool>(threads);
  r.fw = std::make_unique<Forward>(*r.model, *r.kv, r.pool.get(), max_rows);
  return r;
}

std::vector<int32_t> tokens_of(const std::string& fixture) {
  auto ref = testing::load_reference(fixture);
  std::vector<int32_t> t = ref.prompt;
  t.insert(t.end(), ref.continuation.begin(), ref.continuation.end());
  return t;
}

// Logits for every position of `tokens`, fed in chunks of `chunk`.
std::vector<float> prefill_logits(Rig& r, const std::vector<int32_t>& tokens, size_t chunk) {
  SequenceId seq = r.kv->create_sequence();
  std::vector<float> all;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    size_t n = std::min(chunk, tokens.size() - i);
    SequenceStep s{seq, {tokens.data() + i, n}, static_cast<int64_t>(i), LogitRows::all};
    auto out = r.fw->run({&s, 1});
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    all.insert(all.end(), out->logits.begin(), out->logits.end());
  }
  r.kv->release(seq);
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A parameter "bf16:NAME" runs fixture NAME with bf16 activations (ADR 0082:
// bf16 weights multiply bf16-rounded activations, vdpbf16ps's chain).
class Invariance : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr const char* kBf16 = "bf16:";
  bool bf16() const { return GetParam().rfind(kBf16, 0) == 0; }
  std::string fixture() const { return bf16() ? GetParam().substr(std::strlen(kBf16)) : GetParam(); }
  void SetUp() override {
    if (bf16()) kernels::select_activations(kernels::Activations::bf16);
  }
  void TearDown() override { kernels::select_activations(kernels::Activations::f32); }
};

TEST_P(Invariance, PrefillChunkingIsBitwiseInvariant) {
  Rig r = make_rig(fixture());
  const auto tokens = tokens_of(fixture());
  const auto whole = prefill_logits(r, tokens, tokens.size());
  ASSERT_EQ(whole.size(), tokens.size() * r.vocab());
  EXPECT_TRUE(same_bits(whole, prefill_logits(r, tokens, 1))) << "token by token";
  EXPECT_TRUE(same_bits(whole, prefill_logits(r, tokens, 7))) << "chunks of 7";
  Rig small_rows = make_rig(fixture(), 1, /*max_rows=*/5);
  EXPECT_TRUE(same_bits(whole, prefill_logits(small_rows, tokens, tokens.size()))) << "row chunks of 5";
  Rig threaded = make_rig(fixture(), 3);
  EXPECT_TRUE(same_bits(whole, prefill_logits(threaded, tokens, 7))) << "3 threads";
}

// Sequence 0 alone vs. as member 2 of a batch of 5 with other lengths, on 3 threads.
TEST_P(Invariance, DecodeAloneEqualsInsideBatchOfFive) {
  const auto tokens = tokens_of(fixture());
  constexpr int kDecodeSteps = 6;
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 40);
  auto decode_token = [&](int step) { return tokens[40 + step]; };

  Rig alone = make_rig(fixture());
  std::vector<std::vector<float>> alone_logits;
  {
    SequenceId seq = alone.kv->create_sequence();
    SequenceStep s{seq, prompt, 0, LogitRows::last};
    auto out = alone.fw->run({&s, 1});
    ASSERT_TRUE(out.ok());
    alone_logits.emplace_back(out->logits.begin(), out->logits.end());
    for (int i = 0; i < kDecodeSteps; ++i) {
      int32_t t = decode_token(i);
      SequenceStep d{seq, {&t, 1}, alone.kv->length(seq), LogitRows::last};
      out = alone.fw->run({&d, 1});
      ASSERT_TRUE(out.ok());
      alone_logits.emplace_back(out->logits.begin(), out->logits.end());
    }
  }

  Rig batch = make_rig(fixture(), 3);
  const int kTarget = 2;
  const std::vector<size_t> other_lengths = {3, 17, 0, 33, 50};
  std::vector<std::vector<int32_t>> prompts(5);
  std::vector<SequenceId> seqs(5);
  for (int b = 0; b < 5; ++b) {
    seqs[b] = batch.kv->create_sequence();
    if (b == kTarget) {
      prompts[b] = prompt;
    } else {
      for (size_t i = 0; i < other_lengths[b]; ++i) prompts[b].push_back(tokens[(i * 7 + b) % tokens.size()]);
    }
  }
  std::vector<SequenceStep> steps;
  for (int b = 0; b < 5; ++b)
    steps.push_back({seqs[b], prompts[b], 0, b == 1 ? LogitRows::all : LogitRows::last});
  auto out = batch.fw->run(steps);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  auto row_of_target = [&](const ForwardOutput& o) {
    const float* p = o.logits_row(o.first_row[kTarget]);
    return std::vector<float>(p, p + batch.vocab());
  };
  EXPECT_TRUE(same_bits(alone_logits[0], row_of_target(*out))) << "prefill inside a mixed batch";
  for (int i = 0; i < kDecodeSteps; ++i) {
    std::vector<int32_t> next(5);
    steps.clear();
    for (int b = 0; b < 5; ++b) {
      next[b] = b == kTarget ? decode_token(i) : tokens[(i + b) % tokens.size()];
      steps.push_back({seqs[b], {&next[b], 1}, batch.kv->length(seqs[b]), LogitRows::last});
    }
    out = batch.fw->run(steps);
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(same_bits(alone_logits[i + 1], row_of_target(*out))) << "decode step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Invariance, ::testing::ValuesIn(testing::fixture_names()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Bf16Activations, Invariance,
                         ::testing::Values("bf16:llama_default_bf16", "bf16:qwen2_bias_bf16_tied",
                                           "bf16:qwen3_moe_bf16", "bf16:gemma4_text_bf16",
                                           "bf16:mistral_sliding_bf16"),
                         [](const auto& info) { return info.param.substr(5); });

TEST(Forward, RollbackReproducesLogits) {
  Rig r = make_rig("qwen2_bias_bf16_tied");
  const auto tokens = tokens_of("qwen2_bias_bf16_tied");
  SequenceId seq = r.kv->create_sequence();
  SequenceStep s{seq, {tokens.data(), 45}, 0, LogitRows::all};
  auto out = r.fw->run({&s, 1});
  ASSERT_TRUE(out.ok());
  std::vector<float> first(out->logits_row(42), out->logits_row(45));
  r.kv->truncate(seq, 42);  // speculative rollback of 3 positions
  SequenceStep again{seq, {tokens.data() + 42, 3}, 42, LogitRows::all};
  out = r.fw->run({&again, 1});
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(same_bits(first, std::vector<float>(out->logits.begin(), out->logits.end())));
  EXPECT_EQ(r.kv->length(seq), 45);
}

// ForwardOptions::picks_only on the CPU (ADR 0070): one pick per output row
// of a mixed step (a 20-row all-logit prefill, a last-row prefill, a 3-row
// block), each kernels::greedy_pick of that row, with a pool of 3 threads
// spreading the picks and without one; the rows are unchanged by asking.
TEST(Forward, GreedyPicksAreThePicksOfTheRows) {
  for (int threads : {1, 3}) {
    Rig r = make_rig("qwen2_bias_bf16_tied", threads);
    const auto tokens = tokens_of("qwen2_bias_bf16_tied");
    auto steps_at = [&](SequenceId a, SequenceId b, SequenceId c) {
      return std::vector<SequenceStep>{SequenceStep{a, {tokens.data(), 20}, 0, LogitRows::all},
                                       SequenceStep{b, {tokens.data(), 9}, 0, LogitRows::last},
                                       SequenceStep{c, {tokens.data(), 3}, 0, LogitRows::all}};
    };
    std::vector<float> rows;
    {
      const auto steps = steps_at(r.kv->create_sequence(), r.kv->create_sequence(), r.kv->create_sequence());
      auto out = r.fw->run(steps);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      EXPECT_TRUE(out->picks.empty());
      rows.assign(out->logits.begin(), out->logits.end());
    }
    ForwardOptions picks_only;
    picks_only.picks_only = true;
    const auto steps = steps_at(r.kv->create_sequence(), r.kv->create_sequence(), r.kv->create_sequence());
    auto out = r.fw->run(steps, picks_only);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out->rows, 24);
    ASSERT_EQ(out->picks.size(), 24u);
    EXPECT_TRUE(same_bits(rows, std::vector<float>(out->logits.begin(), out->logits.end())));
    for (int64_t row = 0; row < out->rows; ++row) {
      EXPECT_EQ(out->picks[row], kernels::greedy_pick(rows.data() + row * r.vocab(), r.vocab())) << row;
      EXPECT_EQ(out->argmax_row(row), out->picks[row]);
    }
  }
}

TEST(Forward, HiddenStateIsLmHeadInput) {
  Rig r = make_rig("qwen3_qknorm_bf16_tied");
  const auto tokens = tokens_of("qwen3_qknorm_bf16_tied");
  SequenceId seq = r.kv->create_sequence();
  SequenceStep s{seq, {tokens.data(), 10}, 0, LogitRows::all};
  auto out = r.fw->run({&s, 1}, {.hidden = HiddenOutput::after_final_norm});
  ASSERT_TRUE(out.ok());
  const int64_t hs = r.model->config().hidden_size;
  ASSERT_EQ(out->hidden.size(), static_cast<size_t>(10 * hs));
  std::vector<float> hidden(out->hidden.begin(), out->hidden.end());
  std::vector<float> logits(out->logits.begin(), out->logits.end());
  std::vector<float> again(logits.size());
  kernels::matmul(r.fw->ctx(), hidden.data(), 10, r.model->lm_head(), again.data());
  EXPECT_TRUE(same_bits(logits, again));

  SequenceId seq2 = r.kv->create_sequence();
  SequenceStep s2{seq2, {tokens.data(), 10}, 0, LogitRows::last};
  out = r.fw->run({&s2, 1}, {.hidden = HiddenOutput::before_final_norm});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->rows, 1);
  ASSERT_EQ(out->hidden.size(), static_cast<size_t>(hs));
  EXPECT_NE(std::memcmp(out->hidden.data(), hidden.data() + 9 * hs, hs * sizeof(float)), 0);
}

TEST(Forward, DoesNotFitChangesNothing) {
  Rig r = make_rig("llama_default_bf16", 1, 128, /*kv_tokens=*/64);  // 4 blocks of 16
  const auto tokens = tokens_of("llama_default_bf16");
  SequenceId a = r.kv->create_sequence();
  SequenceId b = r.kv->create_sequence();
  std::vector<SequenceStep> steps = {{a, {tokens.data(), 40}, 0, LogitRows::last},
                                     {b, {tokens.data(), 30}, 0, LogitRows::last}};
  auto out = r.fw->run(steps);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("does not fit"), std::string::npos);
  EXPECT_EQ(r.kv->free_blocks(), 4);
  EXPECT_EQ(r.kv->length(a), 0);
  steps.pop_back();
  EXPECT_TRUE(r.fw->run(steps).ok());
}

TEST(Forward, RejectsBadSteps) {
  Rig r = make_rig("llama_default_bf16");
  SequenceId a = r.kv->create_sequence();
  std::vector<int32_t> t = {1, 2, 3};
  SequenceStep wrong_pos{a, t, 5, LogitRows::last};
  EXPECT_EQ(r.fw->run({&wrong_pos, 1}).status().code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> bad = {1, 9999};
  SequenceStep bad_token{a, bad, 0, LogitRows::last};
  EXPECT_NE(r.fw->run({&bad_token, 1}).status().message().find("9999"), std::string::npos);
  std::vector<SequenceStep> dup = {{a, t, 0, LogitRows::last}, {a, t, 0, LogitRows::last}};
  EXPECT_FALSE(r.fw->run(dup).ok());
  SequenceStep unknown{77, t, 0, LogitRows::last};
  EXPECT_FALSE(r.fw->run({&unknown, 1}).ok());
  EXPECT_EQ(r.kv->length(a), 0);
}

}  // namespace
}  // namespace tandem::model

namespace tandem::model {
namespace {

// The matmul mode is each Forward's own (no process-wide mode): a split-K
// Forward and an invariant one run side by side in one process, and the
// invariant one stays bitwise batch-invariant before and after the other ran.
TEST(GemmMode, TwoForwardsWithDifferentModesDoNotAffectEachOther) {
  const std::string fixture = "qwen2_bias_bf16_tied";
  Rig inv = make_rig(fixture, 2);
  Rig split = make_rig(fixture, 2);
  EXPECT_EQ(inv.fw->gemm_mode(), kernels::GemmMode::invariant);  // the default
  split.fw->set_gemm_mode(kernels::GemmMode::splitk);
  EXPECT_EQ(split.fw->gemm_mode(), kernels::GemmMode::splitk);
  EXPECT_EQ(inv.fw->gemm_mode(), kernels::GemmMode::invariant);

  const std::vector<int32_t> tokens = tokens_of(fixture);
  ASSERT_GT(tokens.size(), 4u);
  const std::vector<float> chain = prefill_logits(inv, tokens, 1);  // M = 1: the reference
  const std::vector<float> inv_batch = prefill_logits(inv, tokens, tokens.size());
  const std::vector<float> split_batch = prefill_logits(split, tokens, tokens.size());
  const std::vector<float> inv_again = prefill_logits(inv, tokens, tokens.size());
  EXPECT_TRUE(same_bits(inv_batch, chain));
  EXPECT_TRUE(same_bits(inv_again, chain)) << "the split-K Forward changed the invariant one";
  EXPECT_FALSE(same_bits(split_batch, chain)) << "split-K did not run on its Forward";
  EXPECT_EQ(inv.fw->gemm_mode(), kernels::GemmMode::invariant);
  EXPECT_EQ(split.fw->gemm_mode(), kernels::GemmMode::splitk);
  // M == 1 takes the invariant path in split-K mode too.
  EXPECT_TRUE(same_bits(prefill_logits(split, tokens, 1), chain));
}

}  // namespace
}  // namespace tandem::model
