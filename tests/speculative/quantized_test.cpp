// Speculation stays exact with quantized weights (--weights, ADR 0013/0014):
// on the bundled target and draft model quantized at load to q8_0 and q4_k
// (q4_k: the 384-wide matrices fall back to q4_0, the 1024-wide down_proj is
// q4_k), speculative == classic greedy and seeded for K = 2, 4, 6 with the
// draft model and the MTP head (which shares the quantized LM head); the
// exactness probe passes with the invariant kernels and declines splitk —
// which applies to quantized matmuls too — with its reason string. And the
// same on the target with its block types mixed as a llama.cpp Q4_K_M file
// mixes them (q5_0 and q8_0 inside one fused q/k/v or gate/up: stacked
// matrices, ADR 0032).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <regex>

#include "model/config.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/safetensors.h"
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
  EXPECT_EQ(l.qkv.dtype(), kernels::DType::q5_0);  // k = 384: no whole 256-blocks (llama.cpp's fallback)
  EXPECT_EQ(l.gate_up.dtype(), kernels::DType::q5_0);
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
    init(std::move(*t));
  }
  explicit Bundled(std::unique_ptr<model::Model> t) { init(std::move(t)); }
  void init(std::unique_ptr<model::Model> t) {
    target = std::move(t);
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

// The f16 nearest below-or-at |v| with v's sign (positive f16 bit patterns
// are ordered like their values); any nearby scale serves the test below.
uint16_t to_f16(float v) {
  uint16_t lo = 0, hi = 0x7bff;  // 0 .. the largest finite
  auto value = [](uint16_t h) {
    float f;
    kernels::to_f32(&h, kernels::DType::f16, 1, &f);
    return f;
  };
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (value(mid) <= std::fabs(v)) {
      lo = mid;
    } else {
      hi = static_cast<uint16_t>(mid - 1);
    }
  }
  return static_cast<uint16_t>(lo | (v < 0 ? 0x8000 : 0));
}

// ggml's q5_0 rule (d = the signed max / −16, q = trunc(x/d + 16.5) ≤ 31);
// only a source of q5_0 blocks here: exactness needs no particular rounding.
void quantize_q5_0(const float* x, int64_t count, uint8_t* out) {
  for (int64_t b = 0; b < count / 32; ++b, x += 32, out += 22) {
    float amax = 0, max = 0;
    for (int i = 0; i < 32; ++i) {
      if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
    }
    const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = to_f16(d);
    std::memcpy(out, &h, 2);
    uint32_t qh = 0;
    for (int i = 0; i < 16; ++i) {
      const int q0 = std::min(31, static_cast<int>(x[i] * id + 16.5f));
      const int q1 = std::min(31, static_cast<int>(x[i + 16] * id + 16.5f));
      out[6 + i] = static_cast<uint8_t>((q0 & 15) | ((q1 & 15) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << i;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (i + 16);
    }
    std::memcpy(out + 2, &qh, 4);
  }
}

// The bundled target with its layer matrices in the types a llama.cpp Q4_K_M
// of an 896-wide model has: q/k/o/gate q5_0; v q8_0 in even layers (a q5_0 +
// q5_0 + q8_0 stacked q/k/v) and q5_0 in odd ones; up q8_0 in even layers
// (stacked gate/up); down q4_k. Embedding and norms as stored.
struct MixedCheckpoint {
  model::SafetensorsFile file;
  std::vector<std::vector<uint8_t>> blocks;
};

Expected<std::unique_ptr<model::Model>> load_mixed_target() {
  const std::string dir = models_dir("tandem-target");
  TANDEM_ASSIGN_OR_RETURN(model::ModelConfig config, model::load_config(dir));
  auto owner = std::make_shared<MixedCheckpoint>();
  TANDEM_ASSIGN_OR_RETURN(owner->file, model::SafetensorsFile::open(dir + "/model.safetensors"));
  std::vector<model::TensorView> views;
  for (const auto& [name, view] : owner->file.tensors()) {
    model::TensorView v = view;
    const size_t at = name.find("layers.");
    if (at != std::string::npos && v.shape.size() == 2) {
      const int layer = std::atoi(name.c_str() + at + 7);
      const bool even = layer % 2 == 0;
      kernels::DType type = kernels::DType::q5_0;
      if (name.find("down_proj") != std::string::npos) type = kernels::DType::q4_k;
      if (even && (name.find("v_proj") != std::string::npos || name.find("up_proj") != std::string::npos))
        type = kernels::DType::q8_0;
      std::vector<float> f(static_cast<size_t>(v.numel()));
      kernels::to_f32(v.data, v.dtype, v.numel(), f.data());
      std::vector<uint8_t>& out = owner->blocks.emplace_back(static_cast<size_t>(v.shape[0]) *
                                                             kernels::dtype_row_bytes(type, v.shape[1]));
      if (type == kernels::DType::q5_0) {
        quantize_q5_0(f.data(), v.numel(), out.data());
      } else {
        kernels::quantize(f.data(), type, v.numel(), out.data());
      }
      v.dtype = type;
      v.data = out.data();
      v.bytes = out.size();
    }
    views.push_back(std::move(v));
  }
  model::Checkpoint ck = model::Checkpoint::from_views(dir + " (mixed types)", std::move(views), owner);
  return model::Model::load(std::move(ck), std::move(config));
}

TEST(QuantizedWeights, MixedTypesLikeLlamaCppQ4KMStackAndStayExact) {
  auto m = load_mixed_target();
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const model::LayerWeights& even = (*m)->layers()[0];
  const model::LayerWeights& odd = (*m)->layers()[1];
  ASSERT_EQ(even.qkv.parts().size(), 3u);  // stacked, not widened to f32
  EXPECT_EQ(even.qkv.parts()[0].dtype(), kernels::DType::q5_0);
  EXPECT_EQ(even.qkv.parts()[2].dtype(), kernels::DType::q8_0);
  ASSERT_EQ(even.gate_up.parts().size(), 2u);
  EXPECT_EQ(even.gate_up.parts()[1].dtype(), kernels::DType::q8_0);
  EXPECT_TRUE(odd.qkv.parts().empty());
  EXPECT_EQ(odd.qkv.dtype(), kernels::DType::q5_0);
  EXPECT_EQ(odd.down.dtype(), kernels::DType::q4_k);

  ThreadPool pool(2);
  for (int k : {2, 4}) {
    const ProbeResult exact = run_exactness_probe(**m, &pool, k, kernels::GemmMode::invariant);
    ASSERT_TRUE(exact.ran) << exact.why;
    EXPECT_TRUE(exact.exact) << exact.reason();
    const ProbeResult split = run_exactness_probe(**m, &pool, k, kernels::GemmMode::splitk);
    ASSERT_TRUE(split.ran) << split.why;
    EXPECT_FALSE(split.exact);
    EXPECT_TRUE(std::regex_match(split.reason(), kDiffers)) << split.reason();
  }

  Bundled b(std::move(*m));
  auto draft_config = model::load_config(models_dir("tandem-draft"));
  ASSERT_TRUE(draft_config.ok());
  draft_config->weights = model::WeightsQuant::q8_0;
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
        SCOPED_TRACE(d->describe() + " K=" + std::to_string(k) + " T=" + std::to_string(temperature));
        EXPECT_EQ(run(b, d, params, k), expected);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::speculative
