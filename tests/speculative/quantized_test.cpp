// Speculation stays exact with quantized weights (--weights, ADR 0013/0014):
// on the bundled target and draft model quantized at load to q8_0 and q4_k
// (q4_k: the 384-wide matrices fall back to q4_0, the 1024-wide down_proj is
// q4_k), speculative == classic greedy and seeded for K = 2, 4, 6 with the
// draft model and the MTP head (which shares the quantized LM head); the
// exactness probe passes with the invariant kernels and declines splitk —
// which applies to quantized matmuls too — with its reason string.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "model/config.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/weights_quant.h"
#include "speculative/draft_model.h"
#include "speculative/exactness.h"
#include "speculative/mtp.h"
#include "speculative/sequence.h"

namespace tandem::speculative {
namespace {

std::string models_dir(const std::string& name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/models/" + name;
}

Expected<std::unique_ptr<model::Model>> load_quantized(const std::string& dir, model::WeightsQuant w) {
  TANDEM_ASSIGN_OR_RETURN(model::ModelConfig config, model::load_config(dir));
  config.weights = w;
  return model::Model::load(dir, std::move(config));
}

const model::WeightsQuant kQuants[] = {model::WeightsQuant::q8_0, model::WeightsQuant::q4_k};

TEST(QuantizedWeights, BundledTargetMatricesTakeTheRequestedTypes) {
  auto m = load_quantized(models_dir("tandem-target"), model::WeightsQuant::q4_k);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const model::LayerWeights& l = (*m)->layers().front();
  EXPECT_EQ(l.qkv.dtype(), kernels::DType::q4_0);  // k = 384: no whole 256-blocks
  EXPECT_EQ(l.gate_up.dtype(), kernels::DType::q4_0);
  EXPECT_EQ(l.down.dtype(), kernels::DType::q4_k);  // k = 1024
  EXPECT_EQ((*m)->lm_head().dtype(), kernels::DType::q8_0);
}

const std::regex kDiffers(
    "verify block position [0-9]+ differs from the single-token chain in [0-9]+ of [0-9]+ logit bytes");

TEST(QuantizedWeights, ProbePassesInvariantAndDeclinesSplitk) {
  ThreadPool pool(2);
  for (model::WeightsQuant w : kQuants) {
    auto m = load_quantized(models_dir("tandem-target"), w);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    for (int k : {2, 4}) {
      SCOPED_TRACE(std::string(model::weights_quant_name(w)) + " K=" + std::to_string(k));
      const ProbeResult exact = run_exactness_probe(**m, &pool, k, kernels::GemmMode::invariant);
      ASSERT_TRUE(exact.ran) << exact.why;
      EXPECT_TRUE(exact.exact) << exact.reason();
      const ProbeResult split = run_exactness_probe(**m, &pool, k, kernels::GemmMode::splitk);
      ASSERT_TRUE(split.ran) << split.why;
      EXPECT_FALSE(split.exact);
      EXPECT_TRUE(std::regex_match(split.reason(), kDiffers)) << split.reason();
    }
  }
}

struct Bundled {
  std::unique_ptr<model::Model> target;
  model::KvCache kv;
  std::unique_ptr<model::Forward> forward;
  ThreadPool pool{2};
  explicit Bundled(model::WeightsQuant w) {
    auto t = load_quantized(models_dir("tandem-target"), w);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    target = std::move(*t);
    kv = std::move(*model::KvCache::create(target->config(), model::KvCache::options_for_tokens(1024)));
    forward = std::make_unique<model::Forward>(*target, kv, &pool, 128);
  }
};

std::vector<int32_t> run(Bundled& b, Drafter* drafter, const sampling::SamplingParams& params, int k) {
  sampling::Sampler sampler;
  SequenceState s;
  s.seq = b.kv.create_sequence();
  for (int i = 0; i < 24; ++i) s.prompt.push_back(static_cast<int32_t>(200 + (i * 37) % 700));
  s.params = params;
  s.keep_hidden = drafter && drafter->kind() == DraftKind::mtp;
  EXPECT_TRUE(prefill(*b.forward, sampler, s).ok());
  while (s.generated.size() < 40) {
    if (!drafter) {
      EXPECT_TRUE(classic_step(*b.forward, sampler, s).ok());
      continue;
    }
    auto st = speculative_round(*b.forward, *drafter, sampler, s, k);
    EXPECT_TRUE(st.ok()) << st.status().to_string();
    if (!st.ok()) break;
  }
  if (drafter) drafter->reset();
  b.kv.release(s.seq);
  s.generated.resize(40);
  return s.generated;
}

TEST(QuantizedWeights, SpeculativeEqualsClassicWithQuantizedTargetAndDrafters) {
  for (model::WeightsQuant w : kQuants) {
    Bundled b(w);
    auto draft_config = model::load_config(models_dir("tandem-draft"));
    ASSERT_TRUE(draft_config.ok());
    draft_config->weights = w;
    auto draft = DraftModelDrafter::load(models_dir("tandem-draft"), *draft_config, &b.pool, 1024);
    ASSERT_TRUE(draft.ok()) << draft.status().to_string();
    auto mtp = MtpDrafter::load(models_dir("tandem-mtp"), *b.target, &b.pool, 1024);
    ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
    for (float temperature : {0.0f, 0.8f}) {
      sampling::SamplingParams params;
      params.temperature = temperature;
      params.seed = 7;
      const std::vector<int32_t> expected = run(b, nullptr, params, 0);
      for (Drafter* d : {static_cast<Drafter*>(draft->get()), static_cast<Drafter*>(mtp->get())}) {
        for (int k : {2, 4, 6}) {
          SCOPED_TRACE(std::string(model::weights_quant_name(w)) + " " + d->describe() +
                       " K=" + std::to_string(k) + " T=" + std::to_string(temperature));
          EXPECT_EQ(run(b, d, params, k), expected);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::speculative
