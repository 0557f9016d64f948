// --weights: a bf16 checkpoint quantized at load is bit-identical to gguf-py's
// quantizer (tests/fixtures/quant/weights.bin, tools/fixtures/make_quant_goldens.py)
// and quantize_rows to llama.cpp's (tests/fixtures/quant/llama_cpp.bin, q4_k
// included: ADR 0046), each matrix takes the type model/weights_quant.h
// documents, and the option's parser names the accepted values.
#include "model/weights_quant.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "../kernels/llama_quant_goldens.h"
#include "model/model.h"
#include "test_util.h"

namespace tandem::model {
namespace {

using kernels::DType;

struct GoldenMatrix {
  std::string name, dtype;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> blocks = {};
};

std::vector<GoldenMatrix> load_weights_goldens() {
  std::ifstream f(testing::fixtures_dir() + "/../quant/weights.bin", std::ios::binary);
  EXPECT_TRUE(f.good());
  auto u32 = [&] {
    uint32_t v = 0;
    f.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  char magic[4] = {};
  f.read(magic, 4);
  EXPECT_EQ(std::string(magic, 4), "TQW1");
  std::vector<GoldenMatrix> out;
  for (uint32_t e = 0, count = u32(); e < count && f.good(); ++e) {
    char name[49] = {}, dtype[9] = {};
    f.read(name, 48);
    f.read(dtype, 8);
    GoldenMatrix g{name, dtype};
    g.n = u32();
    g.k = u32();
    const DType d = g.dtype == "q8_0" ? DType::q8_0 : g.dtype == "q5_0" ? DType::q5_0 : DType::q4_0;
    g.blocks.resize(static_cast<size_t>(g.n) * kernels::dtype_row_bytes(d, g.k));
    f.read(reinterpret_cast<char*>(g.blocks.data()), static_cast<std::streamsize>(g.blocks.size()));
    out.push_back(std::move(g));
  }
  EXPECT_EQ(out.size(), 6u);
  return out;
}

std::unique_ptr<Model> load_with(WeightsQuant w) {
  auto config = load_config(testing::fixture_path("llama_default_bf16"));
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  config->weights = w;
  auto m = Model::load(testing::fixture_path("llama_default_bf16"), std::move(*config));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

const kernels::PackedMatrix& matrix_named(const Model& m, const std::string& name) {
  if (name == "model.layers.0.self_attn.o_proj.weight") return m.layers()[0].o;
  if (name == "model.layers.1.mlp.down_proj.weight") return m.layers()[1].down;
  return m.lm_head();
}

void expect_same_packing(const kernels::PackedMatrix& got, const GoldenMatrix& g, DType d) {
  ASSERT_EQ(got.dtype(), d) << g.name;
  const kernels::PackedMatrix want = kernels::PackedMatrix::pack(g.blocks.data(), d, g.n, g.k);
  ASSERT_EQ(got.weight_bytes(), want.weight_bytes());
  // n is a multiple of the 16-column groups here, so weight_bytes() is the whole buffer.
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.weight_bytes())) << g.name << " " << g.dtype;
}

TEST(WeightsQuant, LoadTimeQuantizationIsBitIdenticalToGgufPy) {
  const std::vector<GoldenMatrix> goldens = load_weights_goldens();
  for (WeightsQuant w : {WeightsQuant::q8_0, WeightsQuant::q4_0, WeightsQuant::q4_k}) {
    std::unique_ptr<Model> m = load_with(w);
    ASSERT_NE(m, nullptr);
    for (const GoldenMatrix& g : goldens) {
      const bool head = g.name == "lm_head.weight";
      // Layers: q8_0 under q8_0, q4_0 under q4_0, q5_0 under q4_k (k = 64, 128 < 256:
      // llama.cpp's fallback); the LM head is q8_0 under every option.
      const std::string want = head || w == WeightsQuant::q8_0 ? "q8_0"
                               : w == WeightsQuant::q4_0       ? "q4_0"
                                                               : "q5_0";
      if (g.dtype != want) continue;
      SCOPED_TRACE(std::string(weights_quant_name(w)) + " " + g.name);
      expect_same_packing(matrix_named(*m, g.name), g,
                          want == "q8_0"   ? DType::q8_0
                          : want == "q4_0" ? DType::q4_0
                                           : DType::q5_0);
    }
    EXPECT_LT(m->weight_bytes_per_token(), load_with(WeightsQuant::stored)->weight_bytes_per_token());
  }
}

// The --weights path itself (quantize_rows: widen each stored row to f32,
// quantize) on llama.cpp's goldens: 8 parts of the same [2][k] tensor make
// 16 rows (one whole packed group), packed as llama.cpp's bytes repeated 8 times.
TEST(WeightsQuant, QuantizeRowsIsBitIdenticalToLlamaCpp) {
  int compared = 0;
  const std::string path = testing::fixtures_dir() + "/../quant/llama_cpp.bin";
  for (const tandem::testing::LlamaGolden& g : tandem::testing::load_llama_goldens(path)) {
    TensorView view;
    view.name = g.name;
    view.dtype = g.source;
    view.shape = {g.n, g.k};
    view.data = g.values.data();
    view.bytes = g.values.size();
    const std::vector<const TensorView*> parts(8, &view);
    for (const tandem::testing::LlamaGoldenTarget& t : g.targets) {
      if (t.dtype != DType::q4_k && t.dtype != DType::q8_0 && t.dtype != DType::q4_0 &&
          t.dtype != DType::q5_0)
        continue;  // --weights types (q5_0: q4_k's fallback)
      SCOPED_TRACE(g.name + " " + kernels::dtype_name(g.source) + " -> " + kernels::dtype_name(t.dtype));
      std::vector<uint8_t> repeated;
      for (int r = 0; r < 8; ++r) repeated.insert(repeated.end(), t.blocks.begin(), t.blocks.end());
      const kernels::PackedMatrix got = quantize_rows(parts, t.dtype);
      const kernels::PackedMatrix want = kernels::PackedMatrix::pack(repeated.data(), t.dtype, 8 * g.n, g.k);
      ASSERT_EQ(got.n(), 16);
      ASSERT_EQ(got.weight_bytes(), want.weight_bytes());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.weight_bytes()));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 44);  // 11 tensors (f32, bf16, f16 sources) x 4 types
}

TEST(WeightsQuant, TypePerMatrix) {
  EXPECT_EQ(quantized_dtype(WeightsQuant::stored, DType::bf16, 4096, false), DType::bf16);
  EXPECT_EQ(quantized_dtype(WeightsQuant::q4_k, DType::bf16, 4096, false), DType::q4_k);
  EXPECT_EQ(quantized_dtype(WeightsQuant::q4_k, DType::bf16, 896, false), DType::q5_0);
  EXPECT_EQ(quantized_dtype(WeightsQuant::q4_k, DType::bf16, 4096, true), DType::q8_0);
  EXPECT_EQ(quantized_dtype(WeightsQuant::q4_0, DType::f16, 4096, false), DType::q4_0);
  EXPECT_EQ(quantized_dtype(WeightsQuant::q8_0, DType::f32, 100, false), DType::f32);    // no whole blocks
  EXPECT_EQ(quantized_dtype(WeightsQuant::q8_0, DType::q6_k, 256, false), DType::q6_k);  // already quantized
}

TEST(WeightsQuant, ParseNamesTheAcceptedValues) {
  EXPECT_EQ(*parse_weights_quant(" Q4_K "), WeightsQuant::q4_k);
  EXPECT_EQ(*parse_weights_quant("stored"), WeightsQuant::stored);
  const auto bad = parse_weights_quant("q4_k_m");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("stored, q8_0, q4_0, q4_k"), std::string::npos);
}

}  // namespace
}  // namespace tandem::model
