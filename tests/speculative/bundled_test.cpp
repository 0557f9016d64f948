// The bundled models (models/): the MTP head against its golden values from
// tools/train/mtp.py (float32 PyTorch), and speculative == classic with both
// bundled drafters, greedy and seeded, K = 2..6.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "kernels/ops.h"
#include "model/forward.h"
#include "model/model.h"
#include "speculative/draft_model.h"
#include "speculative/mtp.h"
#include "speculative/sequence.h"

namespace tandem::speculative {
namespace {

std::string models_dir(const std::string& name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/models/" + name;
}

// An F32 tensor of a reference.safetensors (the header is JSON; offsets are
// relative to the data section).
std::vector<float> read_f32(const std::string& path, const std::string& name) {
  auto file = MappedFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return {};
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);
  auto header =
      nlohmann::json::parse(std::string(reinterpret_cast<const char*>(file->data()) + 8, header_len));
  const auto& t = header.at(name);
  EXPECT_EQ(t.at("dtype"), "F32");
  const size_t begin = t.at("data_offsets")[0], end = t.at("data_offsets")[1];
  std::vector<float> out((end - begin) / 4);
  std::memcpy(out.data(), file->data() + 8 + header_len + begin, end - begin);
  return out;
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

struct Bundled {
  std::unique_ptr<model::Model> target;
  model::KvCache kv;
  std::unique_ptr<model::Forward> forward;
  ThreadPool pool{2};
  Bundled() {
    auto t = model::Model::load(models_dir("tandem-target"));
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    target = std::move(*t);
    kv = std::move(*model::KvCache::create(target->config(), model::KvCache::options_for_tokens(1024)));
    forward = std::make_unique<model::Forward>(*target, kv, &pool, 128);
  }
};

TEST(BundledMtp, MatchesItsGoldenValues) {
  Bundled b;
  auto mtp = MtpDrafter::load(models_dir("tandem-mtp"), *b.target, &b.pool, 1024);
  ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  auto ref_text = read_text_file(models_dir("tandem-mtp") + "/reference.json");
  ASSERT_TRUE(ref_text.ok());
  const auto ref = nlohmann::json::parse(*ref_text);
  const std::vector<int32_t> tokens = ref["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t h = b.target->config().hidden_size, vocab = b.target->config().vocab_size;

  // Target hidden states h_0..h_{n-1} after the final norm.
  const model::SequenceId seq = b.kv.create_sequence();
  model::SequenceStep step{seq, tokens, 0, model::LogitRows::none};
  model::ForwardOptions opts;
  opts.hidden = model::HiddenOutput::after_final_norm;
  opts.hidden_all_rows = true;
  auto out = b.forward->run(std::span<const model::SequenceStep>(&step, 1), opts);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> hidden(out->hidden.begin(), out->hidden.end());
  b.kv.release(seq);

  // Depth 1 at every position: argmax identical; the last 8 rows within tolerance.
  auto logits = (*mtp)->depth1_logits(tokens, hidden, 1, n - 1);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  const auto expected_argmax = ref["depth1_argmax"].get<std::vector<int32_t>>();
  for (int64_t t = 0; t < n - 1; ++t)
    EXPECT_EQ(argmax(logits->data() + t * vocab, vocab), expected_argmax[t]) << t;
  const auto last8 = read_f32(models_dir("tandem-mtp") + "/reference.safetensors", "depth1_logits_last8");
  // bf16 weights, float32 arithmetic in a different summation order: the
  // reference's own cross-check observes 1.5e-5; allow 1e-3 absolute.
  double worst = 0;
  for (int64_t i = 0; i < 8 * vocab; ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(last8[i] - (*logits)[(n - 1 - 8) * vocab + i])));
  EXPECT_LT(worst, 1e-3);

  // The greedy recursive chain from the whole sequence.
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<int32_t> prompt(tokens.begin(), tokens.end() - 1), generated = {tokens.back()};
  DraftRequest r{prompt, generated, 5, &greedy, std::span<const float>(hidden.data(), (n - 1) * h), h};
  auto chain = (*mtp)->propose(r);
  ASSERT_TRUE(chain.ok()) << chain.status().to_string();
  EXPECT_EQ(*chain, ref["chain"].get<std::vector<int32_t>>());
}

std::vector<int32_t> prompt_tokens() {
  // A fixed prompt of ids from the bundled vocabulary (ordinary word pieces).
  std::vector<int32_t> p;
  for (int i = 0; i < 24; ++i) p.push_back(static_cast<int32_t>(200 + (i * 37) % 700));
  return p;
}

std::vector<int32_t> run(Bundled& b, Drafter* drafter, const sampling::SamplingParams& params, int k,
                         int64_t* drafted, int64_t* accepted) {
  sampling::Sampler sampler;
  SequenceState s;
  s.seq = b.kv.create_sequence();
  s.prompt = prompt_tokens();
  s.params = params;
  s.keep_hidden = drafter && drafter->kind() == DraftKind::mtp;
  EXPECT_TRUE(prefill(*b.forward, sampler, s).ok());
  while (s.generated.size() < 48) {
    if (!drafter) {
      EXPECT_TRUE(classic_step(*b.forward, sampler, s).ok());
      continue;
    }
    auto st = speculative_round(*b.forward, *drafter, sampler, s, k);
    EXPECT_TRUE(st.ok()) << st.status().to_string();
    if (!st.ok()) break;
    *drafted += st->drafted;
    *accepted += st->accepted;
  }
  if (drafter) drafter->reset();
  b.kv.release(s.seq);
  s.generated.resize(48);
  return s.generated;
}

// Both drafters, K = 2..6 (`ks` of them), greedy and T = 0.8: speculative == classic.
void expect_speculative_equals_classic(const std::vector<int>& ks) {
  Bundled b;
  auto mtp = MtpDrafter::load(models_dir("tandem-mtp"), *b.target, &b.pool, 1024);
  auto draft = DraftModelDrafter::load(models_dir("tandem-draft"), &b.pool, 1024);
  ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  ASSERT_TRUE(draft.ok()) << draft.status().to_string();
  for (float temperature : {0.0f, 0.8f}) {
    sampling::SamplingParams params;
    params.temperature = temperature;
    params.seed = 11;
    const std::vector<int32_t> expected = run(b, nullptr, params, 0, nullptr, nullptr);
    for (Drafter* d : {static_cast<Drafter*>(mtp->get()), static_cast<Drafter*>(draft->get())}) {
      int64_t drafted = 0, accepted = 0;
      for (int k : ks) {
        SCOPED_TRACE(d->describe() + " K=" + std::to_string(k) + " T=" + std::to_string(temperature));
        EXPECT_EQ(run(b, d, params, k, &drafted, &accepted), expected);
      }
      const double rate = static_cast<double>(accepted) / static_cast<double>(drafted);
      std::printf("%s temperature %.1f: acceptance %.3f over K=%d..%d\n", d->describe().c_str(), temperature,
                  rate, ks.front(), ks.back());
      if (temperature == 0.0f) {
        EXPECT_GT(rate, 0.3) << d->describe();
      }
    }
  }
}

TEST(BundledPair, SpeculativeEqualsClassicWithBothDrafters) {
  expect_speculative_equals_classic({2, 3, 4, 5, 6});
}

// The same under bf16 activations (ADR 0082; the bundled models are bf16): what
// TANDEM_CPU_ACTIVATIONS=bf16 / auto runs.
TEST(BundledPair, SpeculativeEqualsClassicWithBf16Activations) {
  kernels::select_activations(kernels::Activations::bf16);
  expect_speculative_equals_classic({2, 4, 6});
  kernels::select_activations(kernels::Activations::f32);
}

// A temperature too small to divide by (1e-39 is a denormal: every logit / T overflows) is greedy
// (sampling::kGreedyTemperature): classic decoding gives temperature 0's tokens, whatever the seed,
// and speculative decoding with either drafter gives the same. Before, the overflow left no token
// (or the lowest id with a positive logit) on every path.
TEST(BundledPair, TinyTemperatureIsGreedyOnEveryPath) {
  Bundled b;
  auto mtp = MtpDrafter::load(models_dir("tandem-mtp"), *b.target, &b.pool, 1024);
  auto draft = DraftModelDrafter::load(models_dir("tandem-draft"), &b.pool, 1024);
  ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  ASSERT_TRUE(draft.ok()) << draft.status().to_string();
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> expected = run(b, nullptr, greedy, 0, nullptr, nullptr);
  sampling::SamplingParams tiny;
  tiny.temperature = 1e-39f;
  tiny.seed = 11;
  EXPECT_EQ(run(b, nullptr, tiny, 0, nullptr, nullptr), expected);
  for (Drafter* d : {static_cast<Drafter*>(mtp->get()), static_cast<Drafter*>(draft->get())}) {
    int64_t drafted = 0, accepted = 0;
    for (int k : {2, 4}) {
      SCOPED_TRACE(d->describe() + " K=" + std::to_string(k));
      EXPECT_EQ(run(b, d, tiny, k, &drafted, &accepted), expected);
    }
  }
}

}  // namespace
}  // namespace tandem::speculative
