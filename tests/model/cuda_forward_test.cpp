// The forward on a CUDA device (ADR 0009), label "gpu": without a device every
// test reports "skipped: no CUDA device".
//
// Bitwise (memcmp) on the GPU: a sequence's logits alone == inside a batch of
// 8 unrelated sequences == prefilled in chunks == decoded one token at a
// time. Tolerance: against transformers' f32 forward (the fixtures'
// reference.*, the same goldens as golden_test.cpp) and against the CPU
// forward. The GPU keeps f32 activations and splits each GEMM input into two
// bf16 terms (|x - hi - lo| <= 2^-18 |x|, ADR 0006) and sums in a different
// order than the CPU, so each logit may drift by a few 1e-6 relative per
// layer; kGpuRelativeTolerance (5e-5 of max(1, max|logit|)) is 2.5x the
// CPU's bound and still far below every fixture's top-1/top-2 margin.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "model/device.h"
#include "model/forward.h"
#include "test_util.h"

#define TANDEM_REQUIRE_CUDA_DEVICE() \
  if (!::tandem::model::cuda_available()) GTEST_SKIP() << "skipped: no CUDA device"

namespace tandem::model {
namespace {

constexpr double kGpuRelativeTolerance = 5e-5;
const Placement kCuda{DeviceKind::cuda, 0};

std::string fixture_dir(const std::string& name) {
  return name == "tandem_target" ? testing::fixture_path("../../../models/tandem-target")
                                 : testing::fixture_path(name);
}

std::vector<std::string> bf16_fixtures() {
  std::vector<std::string> names;
  // The families the GPU forward runs (dense Llama-style blocks; the others are refused by
  // Model::place_on, tested in CudaForward.UnsupportedFamiliesAreRefused... on the CPU side).
  for (const std::string& n : testing::fixture_names()) {
    if (n.find("bf16") == std::string::npos) continue;
    auto config = load_config(testing::fixture_path(n));
    if (config.ok() && cuda_unsupported_feature(*config).empty()) names.push_back(n);
  }
  names.push_back("tandem_target");
  return names;
}

struct Rig {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<Forward> fw;
  int64_t vocab() const { return model->config().vocab_size; }
};

Rig make_rig(const std::string& name, bool cuda, int64_t max_rows = 128) {
  Rig r;
  auto m = Model::load(fixture_dir(name));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  r.model = std::move(*m);
  if (cuda) {
    const Status st = r.model->place_on(kCuda);
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  auto kv = KvCache::create(r.model->config(), KvCache::options_for_tokens(2048, 16));
  EXPECT_TRUE(kv.ok());
  r.kv = std::make_unique<KvCache>(std::move(*kv));
  r.fw = std::make_unique<Forward>(*r.model, *r.kv, nullptr, max_rows);
  return r;
}

// 100 tokens: crosses attention chunks (32) and KV blocks (16) several times.
std::vector<int32_t> long_tokens(int64_t vocab, int salt) {
  std::vector<int32_t> t(100);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 7919 + salt * 104729 + 3) % vocab);
  return t;
}

std::vector<float> run_rows(Rig& r, std::vector<SequenceStep> steps, size_t which) {
  auto out = r.fw->run(steps);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  const int64_t first = out->first_row[which];
  const int64_t count = which + 1 < steps.size() ? out->first_row[which + 1] - first : out->rows - first;
  return std::vector<float>(out->logits_row(first), out->logits_row(first) + count * r.vocab());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CudaInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaInvariance, AloneEqualsBatchOfEightEqualsChunkedEqualsDecode) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Rig r = make_rig(GetParam(), true, 64);  // 100 rows: also two row chunks of the Forward
  const std::vector<int32_t> mine = long_tokens(r.vocab(), 0);
  // Alone, one call.
  SequenceId seq = r.kv->create_sequence();
  const std::vector<float> alone = run_rows(r, {SequenceStep{seq, mine, 0, LogitRows::all}}, 0);
  ASSERT_EQ(alone.size(), mine.size() * r.vocab());
  r.kv->release(seq);

  // Chunked prefill, chunks of 7.
  seq = r.kv->create_sequence();
  std::vector<float> chunked;
  for (size_t i = 0; i < mine.size(); i += 7) {
    const size_t n = std::min<size_t>(7, mine.size() - i);
    auto part =
        run_rows(r, {SequenceStep{seq, {mine.data() + i, n}, static_cast<int64_t>(i), LogitRows::all}}, 0);
    chunked.insert(chunked.end(), part.begin(), part.end());
  }
  EXPECT_TRUE(same_bits(alone, chunked)) << "chunked prefill differs from one call";
  r.kv->release(seq);

  // In a batch of 8 (ours third), others of other lengths and contents.
  std::vector<std::vector<int32_t>> others;
  std::vector<SequenceId> ids;
  std::vector<SequenceStep> steps;
  for (int i = 0; i < 8; ++i) {
    others.push_back(i == 2 ? mine : long_tokens(r.vocab(), i + 1));
    if (i != 2) others.back().resize(20 + 11 * i);
  }
  for (int i = 0; i < 8; ++i) {
    ids.push_back(r.kv->create_sequence());
    steps.push_back(SequenceStep{ids.back(), others[i], 0, LogitRows::all});
  }
  const std::vector<float> batched = run_rows(r, steps, 2);
  EXPECT_TRUE(same_bits(alone, batched)) << "row bits differ inside a batch of 8";
  for (SequenceId id : ids) r.kv->release(id);

  // Decode: prefill 60, then one token per call, alone and beside 7 decoding neighbours.
  for (bool with_neighbours : {false, true}) {
    std::vector<SequenceId> seqs;
    const int n_seq = with_neighbours ? 8 : 1;
    for (int i = 0; i < n_seq; ++i) {
      seqs.push_back(r.kv->create_sequence());
      const std::vector<int32_t>& t = i == 0 ? mine : others[i];
      SequenceStep s{seqs.back(), {t.data(), std::min<size_t>(60, t.size() - 1)}, 0, LogitRows::none};
      ASSERT_TRUE(r.fw->run({&s, 1}).ok());
    }
    std::vector<float> decoded;
    for (size_t p = 60; p < mine.size(); ++p) {
      std::vector<SequenceStep> batch;
      for (int i = 0; i < n_seq; ++i) {
        const int64_t len = r.kv->length(seqs[i]);
        const std::vector<int32_t>& t = i == 0 ? mine : others[i];
        if (i > 0 && len >= static_cast<int64_t>(t.size())) continue;
        batch.push_back(SequenceStep{seqs[i], {t.data() + len, 1}, len, LogitRows::last});
      }
      auto row = run_rows(r, batch, 0);
      decoded.insert(decoded.end(), row.begin(), row.end());
    }
    const std::vector<float> tail(alone.begin() + 60 * r.vocab(), alone.end());
    EXPECT_TRUE(same_bits(tail, decoded))
        << "decode differs from prefill rows (neighbours: " << with_neighbours << ")";
    for (SequenceId id : seqs) r.kv->release(id);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaInvariance, ::testing::ValuesIn(bf16_fixtures()),
                         [](const auto& info) { return info.param; });

class CudaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGolden, MatchesTransformersAndTheCpu) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const std::string name = GetParam();
  const auto ref = testing::load_reference(name == "tandem_target" ? "../../../models/tandem-target" : name);
  Rig gpu = make_rig(name, true), cpu = make_rig(name, false);
  std::vector<int32_t> full = ref.prompt;
  full.insert(full.end(), ref.continuation.begin(), ref.continuation.end());
  SequenceId gs = gpu.kv->create_sequence(), cs = cpu.kv->create_sequence();
  const auto ours = run_rows(gpu, {SequenceStep{gs, full, 0, LogitRows::all}}, 0);
  const auto host = run_rows(cpu, {SequenceStep{cs, full, 0, LogitRows::all}}, 0);
  ASSERT_EQ(ours.size(), ref.logits.size());
  double err_ref = 0, err_cpu = 0;
  int top1_mismatch = 0;
  for (int64_t r = 0; r < ref.tokens; ++r) {
    const float* a = ours.data() + r * ref.vocab;
    for (int64_t i = 0; i < ref.vocab; ++i) {
      err_ref = std::max(err_ref, std::fabs(double(a[i]) - ref.logits[r * ref.vocab + i]));
      err_cpu = std::max(err_cpu, std::fabs(double(a[i]) - host[r * ref.vocab + i]));
    }
    if (kernels::argmax(a, ref.vocab) != kernels::argmax(ref.logits.data() + r * ref.vocab, ref.vocab))
      ++top1_mismatch;
  }
  const double tol = kGpuRelativeTolerance * std::max(1.0, ref.max_abs_logit);
  std::printf("[gpu golden] %-26s max|err| vs transformers %.3g, vs cpu %.3g (max|logit| %.2f, tol %.3g)\n",
              name.c_str(), err_ref, err_cpu, ref.max_abs_logit, tol);
  EXPECT_LE(err_ref, tol);
  EXPECT_LE(err_cpu, tol);
  EXPECT_EQ(top1_mismatch, 0);

  // Greedy continuation: prefill, then one token at a time.
  gpu.kv->release(gs);
  gs = gpu.kv->create_sequence();
  auto out = gpu.fw->run(std::vector<SequenceStep>{SequenceStep{gs, ref.prompt, 0, LogitRows::last}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  std::vector<int32_t> generated;
  while (generated.size() < ref.continuation.size()) {
    generated.push_back(kernels::argmax(out->logits_row(0), ref.vocab));
    if (generated.size() == ref.continuation.size()) break;
    SequenceStep d{gs, {&generated.back(), 1}, gpu.kv->length(gs), LogitRows::last};
    out = gpu.fw->run({&d, 1});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
  }
  EXPECT_EQ(generated, ref.continuation);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGolden, ::testing::ValuesIn(bf16_fixtures()),
                         [](const auto& info) { return info.param; });

// Hidden-state outputs (what the MTP drafter reads) track the CPU's.
// Graphed decode steps key their graphs by a power-of-two bucket of the
// longest block table (ADR 0047): decoding a 600-token sequence crosses the
// 16-, 32- and 64-block buckets (16 tokens per block), beside a short
// neighbour whose table is padded to the bucket; every row equals the same
// row of one eager prefill call.
TEST(CudaForward, GraphedDecodeAcrossTableBucketsEqualsPrefill) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Rig r = make_rig("tandem_target", true, 640);
  std::vector<int32_t> mine(600);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<int32_t>((i * 7919 + 11) % r.vocab());
  SequenceId seq = r.kv->create_sequence();
  const std::vector<float> alone = run_rows(r, {SequenceStep{seq, mine, 0, LogitRows::all}}, 0);
  ASSERT_EQ(alone.size(), mine.size() * r.vocab());
  r.kv->release(seq);
  seq = r.kv->create_sequence();
  const SequenceId neighbour = r.kv->create_sequence();
  const std::vector<int32_t> short_tokens = long_tokens(r.vocab(), 5);
  SequenceStep head{seq, {mine.data(), 200}, 0, LogitRows::none};
  SequenceStep other{neighbour, {short_tokens.data(), 10}, 0, LogitRows::none};
  ASSERT_TRUE(r.fw->run({&head, 1}).ok());
  ASSERT_TRUE(r.fw->run({&other, 1}).ok());
  std::vector<float> decoded;
  for (int64_t p = 200; p < static_cast<int64_t>(mine.size()); ++p) {
    std::vector<SequenceStep> batch{SequenceStep{seq, {mine.data() + p, 1}, p, LogitRows::last}};
    const int64_t len = r.kv->length(neighbour);
    if (len < static_cast<int64_t>(short_tokens.size()))
      batch.push_back(SequenceStep{neighbour, {short_tokens.data() + len, 1}, len, LogitRows::last});
    auto row = run_rows(r, batch, 0);
    decoded.insert(decoded.end(), row.begin(), row.end());
  }
  const std::vector<float> tail(alone.begin() + 200 * r.vocab(), alone.end());
  EXPECT_TRUE(same_bits(tail, decoded)) << "graphed decode across table buckets differs from the prefill";
}

// Forward::warm_up captures the decode graphs before their first use (ADR
// 0047): decoding 8 sequences for 40 steps gives the bits of a Forward that
// captures them as it goes.
TEST(CudaForward, WarmedUpGraphsGiveTheSameBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  std::vector<std::vector<float>> runs;
  for (bool warm : {false, true}) {
    Rig r = make_rig("tandem_target", true, 64);
    if (warm) ASSERT_TRUE(r.fw->warm_up().ok());
    std::vector<SequenceId> seqs;
    std::vector<std::vector<int32_t>> tokens;
    for (int i = 0; i < 8; ++i) {
      seqs.push_back(r.kv->create_sequence());
      tokens.push_back(long_tokens(r.vocab(), i));
    }
    std::vector<float> all;
    for (int64_t p = 0; p < 40; ++p) {
      std::vector<SequenceStep> batch;
      for (int i = 0; i < 8; ++i)
        batch.push_back(SequenceStep{seqs[i], {tokens[i].data() + p, 1}, p, LogitRows::last});
      auto out = r.fw->run(batch);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      all.insert(all.end(), out->logits.begin(), out->logits.end());
    }
    runs.push_back(std::move(all));
  }
  EXPECT_TRUE(same_bits(runs[0], runs[1])) << "warmed-up graphs differ from graphs captured at first use";
}

TEST(CudaForward, HiddenOutputsTrackTheCpu) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Rig gpu = make_rig("tandem_target", true), cpu = make_rig("tandem_target", false);
  const std::vector<int32_t> t = long_tokens(gpu.vocab(), 5);
  for (int mode = 0; mode < 3; ++mode) {
    ForwardOptions o;
    o.hidden = mode == 2 ? HiddenOutput::before_final_norm : HiddenOutput::after_final_norm;
    o.hidden_all_rows = mode == 1;
    SequenceId gs = gpu.kv->create_sequence(), cs = cpu.kv->create_sequence();
    SequenceStep g{gs, t, 0, LogitRows::last}, c{cs, t, 0, LogitRows::last};
    auto a = gpu.fw->run({&g, 1}, o);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    std::vector<float> ga(a->hidden.begin(), a->hidden.end());
    auto b = cpu.fw->run({&c, 1}, o);
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(ga.size(), b->hidden.size()) << "mode " << mode;
    double err = 0, scale = 1;
    for (size_t i = 0; i < ga.size(); ++i) {
      err = std::max(err, std::fabs(double(ga[i]) - b->hidden[i]));
      scale = std::max(scale, std::fabs(double(b->hidden[i])));
    }
    EXPECT_LE(err, kGpuRelativeTolerance * scale) << "mode " << mode;
    gpu.kv->release(gs);
    cpu.kv->release(cs);
  }
}

TEST(CudaForward, RefusesNonBf16WeightsWithAStatus) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  auto m = Model::load(testing::fixture_path("qwen2_bias_f16"));
  ASSERT_TRUE(m.ok());
  const Status st = (*m)->place_on(kCuda);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("bf16"), std::string::npos) << st.to_string();
  EXPECT_EQ((*m)->placement().kind, DeviceKind::cpu);
}

TEST(CudaForward, BadDeviceIndexIsAStatus) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  auto m = Model::load(fixture_dir("tandem_target"));
  ASSERT_TRUE(m.ok());
  const Status st = (*m)->place_on(Placement{DeviceKind::cuda, cuda_device_count()});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tandem::model
