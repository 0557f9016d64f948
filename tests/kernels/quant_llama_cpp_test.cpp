// kernels::quantize against llama.cpp's own quantizer: every tensor of
// tests/fixtures/quant/llama_cpp.bin (f32, bf16 and f16 inputs with varied
// statistics, written by tools/fixtures/make_llama_quant_goldens.py through
// llama_model_quantize, llama-cpp-python 0.3.16) widened to f32 as `--weights`
// widens a checkpoint, quantized, and compared byte for byte (ADR 0046).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace tandem::kernels {
namespace {

struct Target {
  DType dtype;
  std::vector<uint8_t> blocks;
};

struct LlamaGolden {
  std::string name;
  DType source = DType::f32;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> values;  // n·k values of `source`
  std::vector<Target> targets;
};

DType dtype_named(const std::string& name) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q5_0, DType::q4_k,
                  DType::q5_k, DType::q6_k}) {
    if (name == dtype_name(d)) return d;
  }
  ADD_FAILURE() << "unknown dtype " << name;
  return DType::f32;
}

std::vector<LlamaGolden> load_llama_goldens() {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  const std::string path =
      std::string(root ? root : TANDEM_SOURCE_DIR_DEFAULT) + "/tests/fixtures/quant/llama_cpp.bin";
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  auto u32 = [&] {
    uint32_t v = 0;
    f.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  auto text = [&](size_t width) {
    std::string s(width, '\0');
    f.read(s.data(), static_cast<std::streamsize>(width));
    return std::string(s.c_str());
  };
  char magic[4] = {};
  f.read(magic, 4);
  EXPECT_EQ(std::string(magic, 4), "TQL1");
  std::vector<LlamaGolden> out;
  for (uint32_t e = 0, count = u32(); e < count && f.good(); ++e) {
    LlamaGolden g;
    g.name = text(32);
    g.source = dtype_named(text(8));
    g.n = u32();
    g.k = u32();
    g.values.resize(static_cast<size_t>(g.n * g.k) * dtype_size(g.source));
    f.read(reinterpret_cast<char*>(g.values.data()), static_cast<std::streamsize>(g.values.size()));
    for (uint32_t t = 0, targets = u32(); t < targets && f.good(); ++t) {
      Target tg{dtype_named(text(8)), {}};
      tg.blocks.resize(u32());
      f.read(reinterpret_cast<char*>(tg.blocks.data()), static_cast<std::streamsize>(tg.blocks.size()));
      g.targets.push_back(std::move(tg));
    }
    out.push_back(std::move(g));
  }
  EXPECT_TRUE(f.good()) << path << " is truncated";
  return out;
}

// Index of the first differing byte, or -1.
int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

TEST(QuantLlamaCpp, EveryTypeIsBitIdenticalToLlamaCppsQuantizer) {
  const std::vector<LlamaGolden> goldens = load_llama_goldens();
  // 7 f32 tensors, 3 bf16, 1 f16; each in q4_k, q8_0, q4_0, q5_0, q6_k.
  ASSERT_EQ(goldens.size(), 11u);
  int compared = 0;
  for (const LlamaGolden& g : goldens) {
    std::vector<float> x(static_cast<size_t>(g.n * g.k));
    to_f32(g.values.data(), g.source, g.n * g.k, x.data());
    ASSERT_EQ(g.targets.size(), 5u) << g.name;
    for (const Target& t : g.targets) {
      ASSERT_EQ(t.blocks.size(), static_cast<size_t>(g.n) * dtype_row_bytes(t.dtype, g.k)) << g.name;
      std::vector<uint8_t> got(t.blocks.size(), 0xee);
      quantize(x.data(), t.dtype, g.n * g.k, got.data());
      const int64_t at = first_difference(got, t.blocks);
      EXPECT_EQ(at, -1) << g.name << " (" << dtype_name(g.source) << ") as " << dtype_name(t.dtype)
                        << ": first difference at byte " << at << " of block "
                        << at / static_cast<int64_t>(dtype_block_bytes(t.dtype));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 55);
}

// The golden set's edge tensor reaches the branches that matter: an
// all-zero super-block (d = dmin = 0) and a sub-block whose 6-bit scale
// rounds to 0 (its codes stay the fit's, as in the reference).
TEST(QuantLlamaCpp, EdgeTensorCoversZeroScales) {
  for (const LlamaGolden& g : load_llama_goldens()) {
    if (g.name != "edges.weight" || g.source != DType::f32) continue;
    for (const Target& t : g.targets) {
      if (t.dtype != DType::q4_k) continue;
      const uint8_t* zero_block = t.blocks.data() + 144;  // super-block 1
      EXPECT_EQ(zero_block[0] | zero_block[1] | zero_block[2] | zero_block[3], 0);
      const uint8_t* mixed = t.blocks.data() + 2 * 144;  // super-block 2: scales 1 .. 1e-6
      int zero_scales = 0;
      for (int j = 0; j < 4; ++j) zero_scales += (mixed[4 + j] & 63) == 0;
      EXPECT_GE(zero_scales, 1);
      return;
    }
  }
  ADD_FAILURE() << "no f32 edges.weight q4_k entry";
}

}  // namespace
}  // namespace tandem::kernels
