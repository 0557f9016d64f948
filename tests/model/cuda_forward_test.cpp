// The forward on a CUDA device (ADR 0009), label "gpu": without a device every
// test reports "skipped: no CUDA device".
//
// Bitwise (memcmp) on the GPU: a sequence's logits alone == inside a batch of
// 8 unrelated sequences == prefilled in chunks == decoded one token at a
// time (under the default bf16 GEMM inputs; gpu-test.sh reruns the suite with
// TANDEM_CUDA_ACTIVATIONS=f32). Tolerance: with f32 GEMM inputs, against
// transformers' f32 forward (the fixtures' reference.*, the same goldens as
// golden_test.cpp) and against the CPU forward; with bf16 GEMM inputs, against
// transformers' own bf16 forward's distance from those goldens (ADR 0054).
// With f32 GEMM inputs the GPU keeps f32 activations and splits each one into two
// bf16 terms (|x - hi - lo| <= 2^-18 |x|, ADR 0006) and sums in a different
// order than the CPU, so each logit may drift by a few 1e-6 relative per
// layer; kGpuRelativeTolerance (5e-5 of max(1, max|logit|)) is 2.5x the
// CPU's bound and still far below every fixture's top-1/top-2 margin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "../kernels/greedy_rows.h"
#include "../runtime/gguf_fixture.h"
#include "kernels/cuda_ops.h"
#include "kernels/ops.h"
#include "model/device.h"
#include "model/forward.h"
#include "model/weights_quant.h"
#include "test_util.h"

#define TANDEM_REQUIRE_CUDA_DEVICE() \
  if (!::tandem::model::cuda_available()) GTEST_SKIP() << "skipped: no CUDA device"

// A "#" rig needs python3 with the gguf package (tests/runtime/gguf_fixture.h).
#define TANDEM_SKIP_WITHOUT_GGUF_WRITER_FOR(rig)                                                    \
  if ((rig).find('#') != std::string::npos && !::tandem::runtime::testing::gguf_writer_available()) \
  GTEST_SKIP() << "skipped: python3 cannot import gguf (scripts/install-deps.sh installs it)"

namespace tandem::model {
namespace {

constexpr double kGpuRelativeTolerance = 5e-5;
const Placement kCuda{DeviceKind::cuda, 0};

std::string fixture_dir(const std::string& name) {
  return name == "tandem_target" ? testing::fixture_path("../../../models/tandem-target")
                                 : testing::fixture_path(name);
}

// Every fixture: every family runs on the GPU (ADR 0045; cuda_unsupported_feature
// names what would not), the f16 / f32 checkpoints as bf16 terms (ADR 0083).
std::vector<std::string> gpu_fixtures() {
  std::vector<std::string> names;
  for (const std::string& n : testing::fixture_names()) {
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

// The GGUF file "fixture#q4_0" or "fixture#q4_0+q8_0" names: the fixture
// written by tools/fixtures/make_gguf.py (the `gguf` package's writer) with
// every 2-D weight, the embedding included, in the first type (--quantize)
// and the v / down projections in the second (--mixed: a stacked q/k/v of two
// types, as llama.cpp's Q4_K_M files have); "fixture#stored" keeps the checkpoint's
// float types (an f16 checkpoint: an F16 file, llama.cpp's default conversion).
// "" when the writer failed.
std::string gguf_for(const std::string& name) {
  const size_t hash = name.find('#');
  const std::string spec = name.substr(hash + 1), base = name.substr(0, hash);
  if (spec == "stored") return runtime::testing::make_gguf(fixture_dir(base), "stored_" + base);
  const size_t plus = spec.find('+');
  std::string args = "--quantize " + spec.substr(0, plus);
  if (plus != std::string::npos) args += " --mixed " + spec.substr(plus + 1);
  std::string label = spec;
  std::replace(label.begin(), label.end(), '+', '_');
  return runtime::testing::make_gguf(fixture_dir(base), label + "_" + base, args);
}

// "fixture@q8_0": the fixture with its matrices quantized at load (--weights;
// ADR 0064), which the GPU runs through the quantized GEMM (ADR 0077);
// "fixture#q4_0[+q8_0]": a GGUF file of GGUF's own blocks (gguf_for).
Rig make_rig(const std::string& name, bool cuda, int64_t max_rows = 128) {
  Rig r;
  const size_t at = name.find('@');
  const std::string dir =
      name.find('#') != std::string::npos ? gguf_for(name) : fixture_dir(name.substr(0, at));
  EXPECT_FALSE(dir.empty()) << "make_gguf.py failed for " << name;
  auto config = load_config(dir);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  if (at != std::string::npos) {
    auto weights = parse_weights_quant(name.substr(at + 1));
    EXPECT_TRUE(weights.ok()) << weights.status().to_string();
    if (weights.ok()) config->weights = *weights;
  }
  auto m = Model::load(dir, std::move(*config));
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
  TANDEM_SKIP_WITHOUT_GGUF_WRITER_FOR(GetParam());
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

// A test name for a rig name ("a@q8_0" -> "a_q8_0").
std::string param_name(const std::string& rig) {
  std::string n;  // "a@q8_0" -> a_q8_0, "a#q4_0+q8_0" -> a_gguf_q4_0_q8_0
  for (const char ch : rig)
    n += ch == '#' ? std::string("_gguf_") : std::string(1, ch == '@' || ch == '+' ? '_' : ch);
  return n;
}

// Quantized weights on the GPU (ADR 0077): q8_0 / q4_0 everywhere,
// tandem_target@q4_k's down projection (k = 1024) in q4_k and its other
// matrices (k = 384) in q5_0, --weights q4_k's fallback; the dense path, the q/k-norm one and a tied head;
// GGUF files of GGUF's own blocks; sparse MoE experts (ADR 0078: the routed experts over exactly their rows,
// qwen2_moe's shared expert), in GGUF files with F32 routers and shared-expert gates (ADR 0080);
// Gemma 4's per-layer input matrices (gate n = 16, model projection) in q8_0.
std::vector<std::string> quantized_rigs() {
  return {"llama_default_bf16@q8_0",    "qwen2_bias_bf16_tied@q4_0",    "qwen3_qknorm_bf16_tied@q8_0",
          "tandem_target@q4_k",         "llama_default_bf16#q4_0+q8_0", "qwen2_bias_f16#q5_0",
          "qwen3_moe_bf16@q8_0",        "qwen2_moe_shared_bf16@q4_0",   "qwen3_moe_bf16#q8_0",
          "qwen2_moe_shared_bf16#q8_0", "gemma4_text_bf16@q8_0"};
}

std::vector<std::string> invariance_rigs() {
  std::vector<std::string> rigs = gpu_fixtures();
  for (const std::string& q : quantized_rigs()) rigs.push_back(q);
  return rigs;
}

INSTANTIATE_TEST_SUITE_P(Models, CudaInvariance, ::testing::ValuesIn(invariance_rigs()),
                         [](const auto& info) { return param_name(info.param); });

// Prefill 40 tokens, then decode the rest one token per call (CUDA graphs):
// every logit row.
std::vector<float> prefill_then_decode(const std::string& name) {
  Rig r = make_rig(name, true, 64);
  const std::vector<int32_t> t = long_tokens(r.vocab(), 5);
  const SequenceId seq = r.kv->create_sequence();
  std::vector<float> rows = run_rows(r, {SequenceStep{seq, {t.data(), 40}, 0, LogitRows::all}}, 0);
  for (size_t p = 40; p < t.size(); ++p) {
    auto row =
        run_rows(r, {SequenceStep{seq, {t.data() + p, 1}, static_cast<int64_t>(p), LogitRows::last}}, 0);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

// Programmatic dependent launch (ADR 0041) only moves when blocks start:
// the same bits with it off, eager prefill and graphed decode alike.
TEST(CudaForward, ProgrammaticLaunchGivesTheSerialBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const bool before = kernels::gpu::programmatic_launch_enabled();
  kernels::gpu::set_programmatic_launch(false);
  const std::vector<float> serial = prefill_then_decode("tandem_target");
  kernels::gpu::set_programmatic_launch(true);
  const std::vector<float> programmatic = prefill_then_decode("tandem_target");
  kernels::gpu::set_programmatic_launch(before);
  EXPECT_TRUE(same_bits(serial, programmatic));
}

// The GEMM-input numerics a rig is built with (TANDEM_CUDA_ACTIVATIONS, read by
// CudaForward::create; ADR 0054): "f32" (hi + lo split) or "bf16" (the GPU default).
// The environment's value is restored afterwards (scripts/gpu-test.sh runs the whole
// suite once more with TANDEM_CUDA_ACTIVATIONS=f32).
Rig make_rig_with(const std::string& name, const char* activations, int64_t max_rows = 128) {
  const char* before = std::getenv("TANDEM_CUDA_ACTIVATIONS");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("TANDEM_CUDA_ACTIVATIONS", activations, 1);
  Rig r = make_rig(name, true, max_rows);
  if (before != nullptr) {
    ::setenv("TANDEM_CUDA_ACTIVATIONS", saved.c_str(), 1);
  } else {
    ::unsetenv("TANDEM_CUDA_ACTIVATIONS");
  }
  return r;
}

struct GoldenErrors {
  double err_ref = 0, err_cpu = 0;
  int top1_mismatch = 0;
  std::vector<int64_t> top1_changed;  // the rows whose argmax differs from the goldens'
  std::vector<int32_t> greedy;        // from the prompt, one token per call (decode graphs)
};

// The GPU's logits over prompt + continuation against transformers' f32 logits and the
// CPU forward, and its greedy continuation of the prompt.
GoldenErrors golden_errors(const std::string& name, const char* activations, const testing::Reference& ref) {
  GoldenErrors e;
  Rig gpu = make_rig_with(name, activations), cpu = make_rig(name, false);
  std::vector<int32_t> full = ref.prompt;
  full.insert(full.end(), ref.continuation.begin(), ref.continuation.end());
  SequenceId gs = gpu.kv->create_sequence(), cs = cpu.kv->create_sequence();
  const auto ours = run_rows(gpu, {SequenceStep{gs, full, 0, LogitRows::all}}, 0);
  const auto host = run_rows(cpu, {SequenceStep{cs, full, 0, LogitRows::all}}, 0);
  EXPECT_EQ(ours.size(), ref.logits.size());
  if (ours.size() != ref.logits.size()) return e;
  for (int64_t r = 0; r < ref.tokens; ++r) {
    const float* a = ours.data() + r * ref.vocab;
    for (int64_t i = 0; i < ref.vocab; ++i) {
      e.err_ref = std::max(e.err_ref, std::fabs(double(a[i]) - ref.logits[r * ref.vocab + i]));
      e.err_cpu = std::max(e.err_cpu, std::fabs(double(a[i]) - host[r * ref.vocab + i]));
    }
    if (kernels::argmax(a, ref.vocab) != kernels::argmax(ref.logits.data() + r * ref.vocab, ref.vocab)) {
      ++e.top1_mismatch;
      e.top1_changed.push_back(r);
    }
  }
  gpu.kv->release(gs);
  gs = gpu.kv->create_sequence();
  auto out = gpu.fw->run(std::vector<SequenceStep>{SequenceStep{gs, ref.prompt, 0, LogitRows::last}});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  while (out.ok() && e.greedy.size() < ref.continuation.size()) {
    e.greedy.push_back(kernels::argmax(out->logits_row(0), ref.vocab));
    if (e.greedy.size() == ref.continuation.size()) break;
    SequenceStep d{gs, {&e.greedy.back(), 1}, gpu.kv->length(gs), LogitRows::last};
    out = gpu.fw->run({&d, 1});
    EXPECT_TRUE(out.ok()) << out.status().to_string();
  }
  return e;
}

class CudaGolden : public ::testing::TestWithParam<std::string> {};

// f32 activations: within kGpuRelativeTolerance of transformers' f32 logits and of the CPU,
// the same top-1 everywhere and the same greedy continuation.
TEST_P(CudaGolden, F32ActivationsMatchTransformersAndTheCpu) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const std::string name = GetParam();
  const auto ref = testing::load_reference(name == "tandem_target" ? "../../../models/tandem-target" : name);
  const GoldenErrors e = golden_errors(name, "f32", ref);
  const double tol = kGpuRelativeTolerance * std::max(1.0, ref.max_abs_logit);
  std::printf(
      "[gpu golden f32] %-26s max|err| vs transformers %.3g, vs cpu %.3g (max|logit| %.2f, tol %.3g)\n",
      name.c_str(), e.err_ref, e.err_cpu, ref.max_abs_logit, tol);
  EXPECT_LE(e.err_ref, tol);
  EXPECT_LE(e.err_cpu, tol);
  EXPECT_EQ(e.top1_mismatch, 0);
  EXPECT_EQ(e.greedy, ref.continuation);
}

// The gap between the largest and the second largest logit of a row (f32 goldens, or the CPU forward).
// bf16 activations (the GPU default, ADR 0054) are held to transformers running the same
// checkpoint in bf16 on the GPU (tools/fixtures/make_bf16_bounds.py wrote its distance from
// the f32 goldens into tests/fixtures/gpu_bf16_bounds.json): no larger logit error against
// the f32 goldens; and a top-1 change, or the greedy continuation leaving the f32 one, only
// where the goldens' own top-2 margin is within twice that bound (a near-tie that bf16
// rounding may break either way — transformers' bf16 forward breaks such ties too).
TEST_P(CudaGolden, Bf16ActivationsAreNoFurtherFromTheGoldensThanTransformersBf16) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const std::string name = GetParam();
  const auto bound = testing::bf16_bound(name);
  if (!bound.has_value()) GTEST_SKIP() << "no transformers bf16 bound for " << name;
  const auto ref = testing::load_reference(name == "tandem_target" ? "../../../models/tandem-target" : name);
  const GoldenErrors e = golden_errors(name, "bf16", ref);
  const size_t prefix = testing::common_prefix(e.greedy, ref.continuation);
  std::printf(
      "[gpu golden bf16] %-26s max|err| %.3g (transformers bf16 %.3g), top-1 changes %d (%d), "
      "greedy prefix %zu (%d) of %zu\n",
      name.c_str(), e.err_ref, bound->max_abs_err, e.top1_mismatch, bound->top1_mismatch, prefix,
      bound->continuation_prefix, ref.continuation.size());
  EXPECT_LE(e.err_ref, bound->max_abs_err);
  const double tie = 2 * bound->max_abs_err;
  for (int64_t r : e.top1_changed) {
    EXPECT_LE(testing::top2_margin(ref, r), tie) << "row " << r << " changed its top-1 beyond a near-tie";
  }
  if (prefix < ref.continuation.size()) {
    const int64_t row = static_cast<int64_t>(ref.prompt.size() + prefix) - 1;
    EXPECT_LE(testing::top2_margin(ref, row), tie)
        << "greedy left the f32 continuation at " << prefix << " beyond a near-tie";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGolden, ::testing::ValuesIn(gpu_fixtures()),
                         [](const auto& info) { return info.param; });

// Speculative verify on the GPU, at the forward's level: blocks [bonus, d0..d(K-2)]
// whose drafts are partly wrong, the accept walk, and KV rollback, give exactly
// the tokens and logit bits of one-token-at-a-time greedy decode (DESIGN.md:
// spec == classic). Gemma 2, Gemma 4 (KV-shared layers, per-layer inputs) and
// an MoE fixture (the MoE one takes the host routing path with no graphs; the
// Gemma ones replay graphs for the small blocks), f16 and f32 checkpoints (bf16
// terms, ADR 0083).
// TANDEM_TEST_DEVICE=cpu runs it on the CPU (a check of the test itself).
class CudaSpeculative : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSpeculative, VerifyBlocksWithRollbackEqualGreedyDecode) {
  const char* device = std::getenv("TANDEM_TEST_DEVICE");
  const bool cuda = device == nullptr || std::string(device) != "cpu";
  if (cuda) TANDEM_REQUIRE_CUDA_DEVICE();
  TANDEM_SKIP_WITHOUT_GGUF_WRITER_FOR(GetParam());
  Rig r = make_rig(GetParam(), cuda, 64);
  const std::vector<int32_t> prompt = long_tokens(r.vocab(), 9);
  const size_t n_new = 24;
  // Classic: prefill, then one token per call; row i's logits pick token i.
  SequenceId seq = r.kv->create_sequence();
  std::vector<int32_t> classic;
  std::vector<std::vector<float>> classic_logits;
  auto row = run_rows(r, {SequenceStep{seq, prompt, 0, LogitRows::last}}, 0);
  while (classic.size() < n_new) {
    classic_logits.push_back(row);
    classic.push_back(kernels::argmax(row.data(), r.vocab()));
    const int64_t len = r.kv->length(seq);
    row = run_rows(r, {SequenceStep{seq, {&classic.back(), 1}, len, LogitRows::last}}, 0);
  }
  r.kv->release(seq);
  // Speculative: K = 2..5 in turn; every third draft is wrong.
  seq = r.kv->create_sequence();
  row = run_rows(r, {SequenceStep{seq, prompt, 0, LogitRows::last}}, 0);
  std::vector<int32_t> spec{kernels::argmax(row.data(), r.vocab())};
  ASSERT_TRUE(same_bits(row, classic_logits[0]));
  for (int round = 0; spec.size() < n_new; ++round) {
    const size_t k = 2 + round % 4, at = spec.size();
    std::vector<int32_t> block{spec.back()};
    for (size_t j = 0; j + 1 < k; ++j) {
      const size_t i = std::min(at + j, n_new - 1);
      block.push_back((at + j) % 3 == 2 ? (classic[i] + 1) % static_cast<int32_t>(r.vocab()) : classic[i]);
    }
    const int64_t start = r.kv->length(seq);
    const auto logits = run_rows(r, {SequenceStep{seq, block, start, LogitRows::all}}, 0);
    ASSERT_EQ(logits.size(), block.size() * r.vocab());
    size_t accepted = 0;  // rows whose pick is emitted: the first mismatch's pick ends the round
    for (size_t i = 0; i < block.size() && spec.size() < n_new; ++i) {
      const std::vector<float> ri(logits.begin() + i * r.vocab(), logits.begin() + (i + 1) * r.vocab());
      ASSERT_TRUE(same_bits(ri, classic_logits[spec.size()])) << "position " << spec.size();
      const int32_t pick = kernels::argmax(ri.data(), r.vocab());
      spec.push_back(pick);
      accepted = i + 1;
      if (i + 1 < block.size() && block[i + 1] != pick) break;
    }
    r.kv->truncate(seq, start + static_cast<int64_t>(accepted));  // roll back the rejected drafts
  }
  EXPECT_EQ(spec, classic);
  r.kv->release(seq);
}

INSTANTIATE_TEST_SUITE_P(Families, CudaSpeculative,
                         ::testing::Values("gemma2_softcap_bf16", "qwen2_moe_shared_bf16", "gemma4_text_bf16",
                                           "qwen3_qknorm_f16", "gemma4_mm_textonly_f32",
                                           "llama_default_bf16@q4_0", "tandem_target@q4_k",
                                           "llama_default_bf16#q4_0+q8_0", "qwen2_moe_shared_bf16@q4_0",
                                           "gemma4_text_bf16@q4_0"),
                         [](const auto& info) { return param_name(info.param); });

// Quantized weights (ADR 0077): the GPU's quantized GEMM gives the CPU's bits
// for the same f32 rows (test_cuda_kernels), but the rows themselves differ a
// little (attention, norms: the f32 tolerance above), and the int8 rounding
// of an activation may then fall the other way. So the GPU tracks the CPU
// forward with the same quantized weights to a looser bound, and picks the
// same greedy tokens wherever the CPU's top-2 margin is clear of it. A matrix
// --weights leaves in bf16 (k not a multiple of 32: Gemma 4's per-layer
// projection of a fixture) takes its input rounded as the GPU rounds it
// (TANDEM_CUDA_ACTIVATIONS; on the CPU, ADR 0082's bf16 mode): the tiny
// Gemma 4 fixture's logits move 0.23 with that rounding alone.
class CudaQuantized : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaQuantized, TracksTheCpuForwardWithTheSameWeights) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TANDEM_SKIP_WITHOUT_GGUF_WRITER_FOR(GetParam());
  Rig gpu = make_rig(GetParam(), true), cpu = make_rig(GetParam(), false);
  const std::vector<int32_t> t = long_tokens(gpu.vocab(), 3);
  SequenceId gs = gpu.kv->create_sequence(), cs = cpu.kv->create_sequence();
  const Expected<std::string> rounding = cuda_activations();
  ASSERT_TRUE(rounding.ok()) << rounding.status().to_string();
  cpu.fw->ctx().act = *rounding == "bf16" ? kernels::Activations::bf16 : kernels::Activations::f32;
  const auto ours = run_rows(gpu, {SequenceStep{gs, t, 0, LogitRows::all}}, 0);
  const auto host = run_rows(cpu, {SequenceStep{cs, t, 0, LogitRows::all}}, 0);
  ASSERT_EQ(ours.size(), host.size());
  const int64_t v = gpu.vocab();
  double err = 0, scale = 1;
  for (size_t i = 0; i < host.size(); ++i) {
    err = std::max(err, std::fabs(double(ours[i]) - host[i]));
    scale = std::max(scale, std::fabs(double(host[i])));
  }
  int clear_rows = 0;
  for (size_t r = 0; r < t.size(); ++r) {
    const float* h = host.data() + r * v;
    if (testing::top2_margin(h, v) <= 2 * err) continue;
    ++clear_rows;
    EXPECT_EQ(kernels::argmax(ours.data() + r * v, v), kernels::argmax(h, v)) << "row " << r;
  }
  std::printf(
      "[gpu quantized] %-30s max|gpu - cpu| %.3g (max|logit| %.2f); top-1 checked on %d of %zu rows\n",
      GetParam().c_str(), err, scale, clear_rows, t.size());
  EXPECT_LE(err, 2e-2 * scale);
  EXPECT_GE(clear_rows, static_cast<int>(t.size()) / 2);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaQuantized, ::testing::ValuesIn(quantized_rigs()),
                         [](const auto& info) { return param_name(info.param); });

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
    if (warm) {
      ASSERT_TRUE(r.fw->warm_up().ok());
    }
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
  Rig gpu = make_rig_with("tandem_target", "f32"), cpu = make_rig("tandem_target", false);
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

// f16 and f32 checkpoints go to the device as bf16 terms (ADR 0083; their
// logits: CudaGolden) — tied heads, biases, a sparse MoE's experts and routers,
// Gemma 4's per-layer table and projections included.
TEST(CudaForward, PlacesF16AndF32Weights) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  for (const char* name : {"qwen2_bias_f16", "llama_linear_f16_tied", "qwen3_moe_dense0_f16",
                           "llama3_rope_v5_f32", "gemma4_mm_textonly_f32"}) {
    auto m = Model::load(testing::fixture_path(name));
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().to_string();
    const Status st = (*m)->place_on(kCuda);
    EXPECT_TRUE(st.ok()) << name << ": " << st.to_string();
    EXPECT_EQ((*m)->placement().kind, DeviceKind::cuda) << name;
  }
}

// An F16 GGUF file holds its f16 checkpoint's matrices: on the GPU (bf16 terms,
// ADR 0083) the same logit bits, every row of a prompt, as on the CPU (gguf_test.cpp).
TEST(CudaForward, F16GgufFileGivesItsCheckpointsBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  for (const std::string name : {"qwen3_qknorm_f16", "llama_linear_f16_tied"}) {
    TANDEM_SKIP_WITHOUT_GGUF_WRITER_FOR(name + "#stored");
    Rig st = make_rig(name, true), gg = make_rig(name + "#stored", true);
    const std::vector<int32_t> tokens = long_tokens(st.vocab(), 4);
    const auto a = run_rows(st, {SequenceStep{st.kv->create_sequence(), tokens, 0, LogitRows::all}}, 0);
    const auto b = run_rows(gg, {SequenceStep{gg.kv->create_sequence(), tokens, 0, LogitRows::all}}, 0);
    EXPECT_TRUE(same_bits(a, b)) << name;
  }
}

// ADR 0067: once on the device, the host's packed matrices are freed (shapes
// kept); the same placement again is a no-op, another one a clear error, and
// the forward runs from the device copy.
TEST(CudaForward, PlacedModelFreesItsHostMatrices) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  for (const char* name : {"qwen2_moe_shared_bf16", "llama_default_bf16"}) {
    Rig r = make_rig(name, true);
    const LayerWeights& w = r.model->layers()[0];
    const kernels::PackedMatrix& m = r.model->config().sparse(0) ? w.router : w.qkv;
    EXPECT_TRUE(m.released()) << name;
    EXPECT_EQ(m.data(), nullptr) << name;
    EXPECT_GT(m.n(), 0) << name;
    EXPECT_GT(r.model->weight_bytes_per_token(), size_t{0}) << name;
    EXPECT_TRUE(r.model->place_on(kCuda).ok()) << name;
    const Status cpu = r.model->place_on(Placement{});
    EXPECT_EQ(cpu.code(), StatusCode::kFailedPrecondition) << name;
    EXPECT_NE(cpu.message().find("load it again"), std::string::npos) << cpu.to_string();
    EXPECT_EQ(r.model->placement().kind, DeviceKind::cuda) << name;
    const SequenceId seq = r.kv->create_sequence();
    const std::vector<float> logits =
        run_rows(r, {SequenceStep{seq, long_tokens(r.vocab(), 3), 0, LogitRows::last}}, 0);
    ASSERT_EQ(logits.size(), static_cast<size_t>(r.vocab())) << name;
    for (const float v : logits) ASSERT_TRUE(std::isfinite(v)) << name;
  }
}

TEST(CudaForward, BadDeviceIndexIsAStatus) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  auto m = Model::load(fixture_dir("tandem_target"));
  ASSERT_TRUE(m.ok());
  const Status st = (*m)->place_on(Placement{DeviceKind::cuda, cuda_device_count()});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
}

// More than 16 rows of many sequences in one call (ADR 0043's segments): 17
// sequences decoding together (one split-shape call over rows of 17 tables),
// and on every third step a 40-token prefill chunk of another sequence in the
// same call (a tile-shape segment beside them; the KV holds 2048 tokens, so
// each is released after its step). Our decoded rows equal the rows of one
// prefill call.
TEST(CudaForward, DecodeBesideManyNeighboursAndAPrefillChunk) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Rig r = make_rig("tandem_target", true, 128);
  const std::vector<int32_t> mine = long_tokens(r.vocab(), 0);
  SequenceId seq = r.kv->create_sequence();
  const std::vector<float> alone = run_rows(r, {SequenceStep{seq, mine, 0, LogitRows::all}}, 0);
  r.kv->release(seq);
  constexpr int kSeqs = 17;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<SequenceId> seqs;
  for (int i = 0; i < kSeqs; ++i) {
    tokens.push_back(i == 0 ? mine : long_tokens(r.vocab(), i + 1));
    seqs.push_back(r.kv->create_sequence());
    SequenceStep s{seqs.back(), {tokens.back().data(), 60}, 0, LogitRows::none};
    ASSERT_TRUE(r.fw->run({&s, 1}).ok());
  }
  const std::vector<int32_t> extra = long_tokens(r.vocab(), 99);
  std::vector<float> decoded;
  for (int64_t p = 60; p < static_cast<int64_t>(mine.size()); ++p) {
    std::vector<SequenceStep> batch;
    for (int i = 0; i < kSeqs; ++i)
      batch.push_back(SequenceStep{seqs[i], {tokens[i].data() + p, 1}, p, LogitRows::last});
    const SequenceId prefill = r.kv->create_sequence();
    if (p % 3 == 0) batch.push_back(SequenceStep{prefill, {extra.data(), 40}, 0, LogitRows::last});
    auto row = run_rows(r, batch, 0);
    decoded.insert(decoded.end(), row.begin(), row.end());
    r.kv->release(prefill);
  }
  const std::vector<float> tail(alone.begin() + 60 * r.vocab(), alone.end());
  EXPECT_TRUE(same_bits(tail, decoded)) << "decode beside 16 neighbours (and a prefill chunk) differs";
  for (SequenceId id : seqs) r.kv->release(id);
}

// TANDEM_CUDA_ACTIVATIONS=bf16 (ADR 0044): GEMM inputs rounded to bf16. Other
// bits than the default, but still a function of the row alone: one call ==
// chunks of 7 == beside another sequence == decoded one token per call (CUDA
// graphs); and near the f32 path (a loose sanity bound, the measured figure
// printed).
// The fused glue (epilogues that sum the GEMM's slabs, add, normalise and, with bf16
// GEMM inputs, write the next GEMM's bf16 input themselves) gives the bits of the unfused
// sequence (TANDEM_CUDA_FUSE=0: separate kernels and a to_bf16 pass before every GEMM),
// and so does the residual add without the norm riding on it (TANDEM_CUDA_FUSE_NORM=0),
// under both GEMM-input numerics.
TEST(CudaForward, FusedGlueGivesTheUnfusedBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  for (const char* act : {"bf16", "f32"}) {
    for (const std::string& name : {std::string("tandem_target"), std::string("qwen2_bias_bf16_tied")}) {
      auto logits = [&](const char* knob) {
        if (knob != nullptr) ::setenv(knob, "0", 1);
        Rig r = make_rig_with(name, act, 64);
        if (knob != nullptr) ::unsetenv(knob);
        const std::vector<int32_t> t = long_tokens(r.vocab(), 3);
        const SequenceId seq = r.kv->create_sequence();
        return run_rows(r, {SequenceStep{seq, t, 0, LogitRows::all}}, 0);
      };
      const std::vector<float> fused = logits(nullptr);
      EXPECT_TRUE(same_bits(fused, logits("TANDEM_CUDA_FUSE"))) << name << " " << act << ": FUSE=0";
      EXPECT_TRUE(same_bits(fused, logits("TANDEM_CUDA_FUSE_NORM"))) << name << " " << act << ": FUSE_NORM=0";
    }
  }
}

// ADR 0056: attention writing the o projection's bf16 input and the last residual add
// carrying the final norm (graphed steps whose every row wants logits) give the bits of
// the separate passes (TANDEM_CUDA_FUSE_LAUNCHES=0): a prefill, decode steps and a
// 4-row block with all logits (both replayed graphs), under both GEMM-input numerics.
TEST(CudaForward, FusedLaunchesGiveTheSeparatePassesBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  for (const char* act : {"bf16", "f32"}) {
    for (const std::string& name : {std::string("tandem_target"), std::string("qwen2_bias_bf16_tied")}) {
      auto logits = [&](bool separate) {
        if (separate) ::setenv("TANDEM_CUDA_FUSE_LAUNCHES", "0", 1);
        Rig r = make_rig_with(name, act, 64);
        if (separate) ::unsetenv("TANDEM_CUDA_FUSE_LAUNCHES");
        const std::vector<int32_t> t = long_tokens(r.vocab(), 7);
        const SequenceId seq = r.kv->create_sequence();
        std::vector<float> rows = run_rows(r, {SequenceStep{seq, {t.data(), 30}, 0, LogitRows::all}}, 0);
        for (int64_t p = 30; p < 36; ++p) {
          auto row = run_rows(r, {SequenceStep{seq, {t.data() + p, 1}, p, LogitRows::last}}, 0);
          rows.insert(rows.end(), row.begin(), row.end());
        }
        auto block = run_rows(r, {SequenceStep{seq, {t.data() + 36, 4}, 36, LogitRows::all}}, 0);
        rows.insert(rows.end(), block.begin(), block.end());
        return rows;
      };
      const std::vector<float> fused = logits(false);
      EXPECT_EQ(fused.size(), logits(true).size());
      EXPECT_TRUE(same_bits(fused, logits(true))) << name << " " << act << ": FUSE_LAUNCHES=0";
    }
  }
}

// ForwardOptions::picks_only (ADR 0070, 0072): the picks a step returns, made
// on the device (a prefill's all-row chunk, graphed decode steps, a 4-row
// block, a two-sequence step), equal the picks of the rows the same steps
// return without it — kernels::greedy_pick, or for sampled rules every
// Gumbel score computed on the host (core/gumbel.h); TANDEM_CUDA_GRAPH_PICK=0
// (the pick queued after a graph, not in it) gives them too, and
// TANDEM_CUDA_DEVICE_PICK=0 (host picks) the greedy ones, leaving sampled rows
// to the caller (-1, the row on the host). Rows whose rule needs the row get
// -1 and their row (the only rows downloaded).
std::vector<int32_t> picks_of_steps(bool picks_only, std::span<const kernels::PickRule> rules) {
  Rig r = make_rig_with("tandem_target", "bf16", 64);
  ForwardOptions options;
  options.picks_only = picks_only;
  const std::vector<int32_t> t = long_tokens(r.vocab(), 3), u = long_tokens(r.vocab(), 4);
  const SequenceId a = r.kv->create_sequence(), b = r.kv->create_sequence();
  std::vector<std::vector<SequenceStep>> steps = {{SequenceStep{a, {t.data(), 20}, 0, LogitRows::all}},
                                                  {SequenceStep{b, {u.data(), 20}, 0, LogitRows::last}}};
  for (int64_t p = 20; p < 24; ++p) steps.push_back({SequenceStep{a, {t.data() + p, 1}, p, LogitRows::last}});
  steps.push_back({SequenceStep{a, {t.data() + 24, 4}, 24, LogitRows::all}});
  steps.push_back({SequenceStep{a, {t.data() + 28, 1}, 28, LogitRows::last},
                   SequenceStep{b, {u.data() + 20, 1}, 20, LogitRows::last}});
  std::vector<int32_t> picks;
  size_t rule = 0;
  for (const auto& step : steps) {
    const size_t rows =
        step.size() == 1 && step[0].logits == LogitRows::all ? step[0].tokens.size() : step.size();
    options.pick_rules = rules.empty() ? rules : rules.subspan(rule, rows);
    auto out = r.fw->run(step, options);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return picks;
    EXPECT_EQ(static_cast<size_t>(out->rows), rows);
    for (int64_t row = 0; row < out->rows; ++row, ++rule) {
      kernels::PickRule pick_rule = rules.empty() ? kernels::PickRule{} : rules[rule];
      if (picks_only && pick_rule.needs_row != 0) {
        EXPECT_EQ(out->picks[row], -1);
      }
      pick_rule.needs_row = 0;  // its row, picked on the host, must be the row
      if (picks_only) {
        EXPECT_EQ(out->picks.size(), static_cast<size_t>(out->rows));
        // -1: the caller picks from the row (a sampled rule off the device), as pick_row does.
        picks.push_back(out->picks[row] >= 0
                            ? out->picks[row]
                            : tandem::testing::every_score_pick(out->logits_row(row), r.vocab(), pick_rule));
      } else {
        EXPECT_TRUE(out->picks.empty());
        picks.push_back(tandem::testing::every_score_pick(out->logits_row(row), r.vocab(), pick_rule));
      }
    }
  }
  return picks;
}

TEST(CudaForward, PicksAreThePicksOfTheRows) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  std::vector<kernels::PickRule> rules(31);
  const float temperatures[] = {0.8f, 0.0f, 1.0f, 1.6f, 0.05f};
  for (size_t i = 0; i < rules.size(); ++i)  // rows 3, 10, 17, 24: the caller needs the row (-1, downloaded)
    rules[i] = kernels::PickRule{temperatures[i % 5], i % 7 == 3 ? 1u : 0u, 4242 + 7 * i,
                                 static_cast<int64_t>(100 + i)};
  for (bool sampled : {false, true}) {
    const std::span<const kernels::PickRule> use =
        sampled ? std::span<const kernels::PickRule>(rules) : std::span<const kernels::PickRule>();
    const std::vector<int32_t> want = picks_of_steps(false, use);
    ASSERT_EQ(want.size(), 20u + 1 + 4 + 4 + 2);
    EXPECT_EQ(picks_of_steps(true, use), want) << "sampled " << sampled;
    ::setenv("TANDEM_CUDA_GRAPH_PICK", "0", 1);
    EXPECT_EQ(picks_of_steps(true, use), want) << "sampled " << sampled;
    ::unsetenv("TANDEM_CUDA_GRAPH_PICK");
    ::setenv("TANDEM_CUDA_DEVICE_PICK", "0", 1);
    EXPECT_EQ(picks_of_steps(true, use), want) << "sampled " << sampled;
    ::unsetenv("TANDEM_CUDA_DEVICE_PICK");
  }
}

TEST(CudaBf16Activations, InvariantAndNearTheF32Path) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Rig f32 = make_rig_with("tandem_target", "f32", 64);
  Rig r = make_rig_with("tandem_target", "bf16", 64);
  const std::vector<int32_t> mine = long_tokens(r.vocab(), 0);
  SequenceId seq = f32.kv->create_sequence();
  const std::vector<float> reference = run_rows(f32, {SequenceStep{seq, mine, 0, LogitRows::all}}, 0);
  seq = r.kv->create_sequence();
  const std::vector<float> alone = run_rows(r, {SequenceStep{seq, mine, 0, LogitRows::all}}, 0);
  r.kv->release(seq);
  ASSERT_EQ(alone.size(), reference.size());
  EXPECT_FALSE(same_bits(alone, reference)) << "the option changed nothing";
  double max_abs = 1.0, max_diff = 0.0;
  for (size_t i = 0; i < alone.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(reference[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(alone[i]) - reference[i]));
  }
  std::printf("[ bf16 activations ] max |dlogit| / max(1, max|logit|) = %.3g vs the f32 path\n",
              max_diff / max_abs);
  EXPECT_LE(max_diff / max_abs, 0.05);

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

  const SequenceId other = r.kv->create_sequence();
  seq = r.kv->create_sequence();
  const std::vector<int32_t> theirs = long_tokens(r.vocab(), 5);
  const std::vector<float> batched = run_rows(
      r, {SequenceStep{other, theirs, 0, LogitRows::all}, SequenceStep{seq, mine, 0, LogitRows::all}}, 1);
  EXPECT_TRUE(same_bits(alone, batched)) << "row bits differ beside another sequence";
  r.kv->release(other);
  r.kv->release(seq);

  seq = r.kv->create_sequence();
  std::vector<float> decoded = run_rows(r, {SequenceStep{seq, {mine.data(), 60}, 0, LogitRows::all}}, 0);
  for (size_t i = 60; i < mine.size(); ++i) {
    auto row =
        run_rows(r, {SequenceStep{seq, {mine.data() + i, 1}, static_cast<int64_t>(i), LogitRows::all}}, 0);
    decoded.insert(decoded.end(), row.begin(), row.end());
  }
  EXPECT_TRUE(same_bits(alone, decoded)) << "decode (graphs) differs from one call";
  r.kv->release(seq);
}

}  // namespace
}  // namespace tandem::model
