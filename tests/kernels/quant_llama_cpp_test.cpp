// kernels::quantize against llama.cpp's own quantizer: every tensor of
// tests/fixtures/quant/llama_cpp.bin (f32, bf16 and f16 inputs with varied
// statistics, written by tools/fixtures/make_llama_quant_goldens.py through
// llama_model_quantize, llama-cpp-python 0.3.16) widened to f32 as `--weights`
// widens a checkpoint, quantized, and compared byte for byte (ADR 0046).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_table.h"
#include "kernels/ops.h"
#include "llama_quant_goldens.h"

namespace tandem::kernels {
namespace {

using testing::LlamaGolden;
using testing::LlamaGoldenTarget;

std::vector<LlamaGolden> load_llama_goldens() {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return testing::load_llama_goldens(std::string(root ? root : TANDEM_SOURCE_DIR_DEFAULT) +
                                     "/tests/fixtures/quant/llama_cpp.bin");
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
    for (const LlamaGoldenTarget& t : g.targets) {
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

// Every ISA's q4_k quantizer (the fit in 4, 8 or 16 lanes: 1, 2 or 4
// super-blocks at a time) gives llama.cpp's bytes, on every block count:
// the whole tensor, and each prefix length 1..9 (a partial last group padded
// with zero blocks must not change the blocks before it).
TEST(QuantLlamaCpp, EveryIsaQuantizesQ4KAsLlamaCpp) {
  std::vector<Isa> isas;  // (test_util.h's supported_isas: its namespace hides the goldens')
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) isas.push_back(isa);
  int compared = 0;
  for (const LlamaGolden& g : load_llama_goldens()) {
    std::vector<float> x(static_cast<size_t>(g.n * g.k));
    to_f32(g.values.data(), g.source, g.n * g.k, x.data());
    for (const LlamaGoldenTarget& t : g.targets) {
      if (t.dtype != DType::q4_k) continue;
      const int64_t blocks = g.n * g.k / 256;
      for (Isa isa : isas) {
        std::vector<uint8_t> got(t.blocks.size(), 0xee);
        kernels_for(isa).quantize_q4_k(x.data(), blocks, got.data());
        EXPECT_EQ(first_difference(got, t.blocks), -1) << g.name << " on " << isa_name(isa);
        for (int64_t count = 1; count <= std::min<int64_t>(9, blocks); ++count) {
          std::vector<uint8_t> part(static_cast<size_t>(count) * 144, 0xee);
          kernels_for(isa).quantize_q4_k(x.data(), count, part.data());
          EXPECT_EQ(std::memcmp(part.data(), t.blocks.data(), part.size()), 0)
              << g.name << " on " << isa_name(isa) << ", " << count << " blocks";
        }
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 11 * static_cast<int>(isas.size()));
}

// The golden set's edge tensor reaches the branches that matter: an
// all-zero super-block (d = dmin = 0) and a sub-block whose 6-bit scale
// rounds to 0 (its codes stay the fit's, as in the reference).
TEST(QuantLlamaCpp, EdgeTensorCoversZeroScales) {
  for (const LlamaGolden& g : load_llama_goldens()) {
    if (g.name != "edges.weight" || g.source != DType::f32) continue;
    for (const LlamaGoldenTarget& t : g.targets) {
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
