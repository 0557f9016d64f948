// MTP layers stored inside the target's checkpoint (ADR 0027): the MiMo-layout
// fixture (tests/fixtures/models/mimo_mtp_bf16, written by
// tools/fixtures/make_mimo_mtp.py) against the golden values its PyTorch
// reference computed from MiMo's published module definition — depth-1 logits
// within the MTP head's tolerance, argmax at every entry, the greedy recursive
// chain — the exactness probe on that target, and the errors for a checkpoint
// without MTP layers and for DeepSeek-V3's layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/mtp_layout.h"
#include "speculative/exactness.h"
#include "speculative/mtp.h"

namespace tandem::speculative {
namespace {

std::string fixture_dir(const std::string& name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/fixtures/models/" + name;
}

// An F32 tensor of a reference.safetensors.
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

TEST(MtpLayers, MimoLayoutMatchesThePyTorchReference) {
  const std::string dir = fixture_dir("mimo_mtp_bf16");
  auto target = model::Model::load(dir);
  ASSERT_TRUE(target.ok()) << target.status().to_string();
  const model::Model& m = **target;
  EXPECT_EQ(m.config().family, model::Family::qwen2) << "model_type mimo is a Qwen2 trunk";
  ThreadPool pool(2);
  auto mtp = MtpDrafter::load_embedded(m, &pool, 256);
  ASSERT_TRUE(mtp.ok()) << mtp.status().to_string();
  EXPECT_TRUE((*mtp)->layout().hidden_first);
  EXPECT_EQ((*mtp)->layout().rope_offset, 0);

  auto ref_text = read_text_file(dir + "/reference.json");
  ASSERT_TRUE(ref_text.ok());
  const auto ref = nlohmann::json::parse(*ref_text);
  std::vector<int32_t> tokens = ref["prompt"].get<std::vector<int32_t>>();
  for (int32_t t : ref["continuation"].get<std::vector<int32_t>>()) tokens.push_back(t);
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t h = m.config().hidden_size, vocab = m.config().vocab_size;

  // The target's final hidden states h_0..h_{n-1} (after model.norm), as the engine keeps them.
  auto kv = model::KvCache::create(m.config(), model::KvCache::options_for_tokens(256));
  ASSERT_TRUE(kv.ok());
  model::Forward forward(m, *kv, &pool, 64);
  const model::SequenceId seq = kv->create_sequence();
  model::SequenceStep step{seq, tokens, 0, model::LogitRows::none};
  model::ForwardOptions opts;
  opts.hidden = model::HiddenOutput::after_final_norm;
  opts.hidden_all_rows = true;
  auto out = forward.run(std::span<const model::SequenceStep>(&step, 1), opts);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> hidden(out->hidden.begin(), out->hidden.end());

  // Depth 1 at every entry (token positions 1..n-1): within the MTP head's tolerance, same argmax.
  auto logits = (*mtp)->depth1_logits(tokens, hidden, 1, n - 1);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  const std::vector<float> expected = read_f32(dir + "/reference.safetensors", "depth1_logits");
  ASSERT_EQ(expected.size(), static_cast<size_t>((n - 1) * vocab));
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(expected[i] - (*logits)[i])));
  // bf16 weights, float32 arithmetic in another summation order; the same bound as the bundled
  // head's (docs/formats.md). The reference records that the likely mistakes move these logits by
  // far more: concat[embedding, hidden] ~8, the hidden state before the final norm ~1.
  EXPECT_LT(worst, 1e-3);
  const auto expected_argmax = ref["depth1_argmax"].get<std::vector<int32_t>>();
  for (int64_t t = 0; t < n - 1; ++t)
    EXPECT_EQ(argmax(logits->data() + t * vocab, vocab), expected_argmax[t]) << "entry " << t;

  // The greedy recursive chain with the whole sequence as context.
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<int32_t> prompt(tokens.begin(), tokens.end() - 1), generated = {tokens.back()};
  DraftRequest r{prompt, generated, 5, &greedy, std::span<const float>(hidden.data(), (n - 1) * h), h};
  auto chain = (*mtp)->propose(r);
  ASSERT_TRUE(chain.ok()) << chain.status().to_string();
  EXPECT_EQ(*chain, ref["chain"].get<std::vector<int32_t>>());
}

TEST(MtpLayers, TheExactnessProbePassesOnTheMimoTarget) {
  auto target = model::Model::load(fixture_dir("mimo_mtp_bf16"));
  ASSERT_TRUE(target.ok()) << target.status().to_string();
  ThreadPool pool(2);
  for (int k : {2, 4, 8}) {
    ProbeResult r = run_exactness_probe(**target, &pool, k, kernels::GemmMode::invariant);
    ASSERT_TRUE(r.ran) << r.why;
    EXPECT_TRUE(r.exact) << "K=" << k << ": " << r.reason();
  }
}

TEST(MtpLayers, ACheckpointWithoutThemIsAClearError) {
  auto target = model::Model::load(fixture_dir("qwen2_bias_f16"));
  ASSERT_TRUE(target.ok()) << target.status().to_string();
  auto mtp = MtpDrafter::load_embedded(**target, nullptr, 64);
  ASSERT_FALSE(mtp.ok());
  EXPECT_EQ(mtp.status().code(), StatusCode::kNotFound);
  EXPECT_NE(mtp.status().message().find("qwen2_bias_f16 holds no MTP layers"), std::string::npos)
      << mtp.status().message();
}

// DeepSeek-V3 keeps its module as layer num_hidden_layers (enorm, hnorm, eh_proj,
// shared_head): recognised, refused with the reason.
TEST(MtpLayers, DeepSeekV3LayoutIsRefusedSayingWhy) {
  namespace fs = std::filesystem;
  const std::string src = fixture_dir("llama_default_bf16");
  const std::string dir = ::testing::TempDir() + "tandem_deepseek_layout";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src + "/config.json", dir + "/config.json");
  auto ck = model::Checkpoint::open_dir(src);
  ASSERT_TRUE(ck.ok());
  std::vector<model::TensorToWrite> tensors;
  auto original = model::SafetensorsFile::open(src + "/model.safetensors");
  ASSERT_TRUE(original.ok());
  for (const auto& [name, v] : original->tensors()) tensors.push_back({name, v.dtype, v.shape, v.data});
  const int64_t hidden = 64;
  std::vector<float> eh(static_cast<size_t>(hidden * 2 * hidden), 0.01f);
  tensors.push_back({"model.layers.2.eh_proj.weight", kernels::DType::f32, {hidden, 2 * hidden}, eh.data()});
  ASSERT_TRUE(model::write_safetensors(dir + "/model.safetensors", tensors).ok());
  auto target = model::Model::load(dir);
  ASSERT_TRUE(target.ok()) << target.status().to_string();
  ASSERT_EQ(target->get()->config().num_layers, 2);
  auto mtp = MtpDrafter::load_embedded(**target, nullptr, 64);
  ASSERT_FALSE(mtp.ok());
  EXPECT_EQ(mtp.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(mtp.status().message().find("DeepSeek-V3"), std::string::npos) << mtp.status().message();
  EXPECT_NE(mtp.status().message().find("MLA attention"), std::string::npos) << mtp.status().message();
}

}  // namespace
}  // namespace tandem::speculative
