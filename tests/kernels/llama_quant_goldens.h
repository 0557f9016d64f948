// The llama.cpp quantizer goldens (tests/fixtures/quant/llama_cpp.bin,
// written by tools/fixtures/make_llama_quant_goldens.py; format in its
// docstring): per tensor its stored values and llama.cpp's bytes in each
// quantized type. Shared by the kernel and the --weights tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace tandem::testing {

struct LlamaGoldenTarget {
  kernels::DType dtype;
  std::vector<uint8_t> blocks;
};

struct LlamaGolden {
  std::string name;
  kernels::DType source = kernels::DType::f32;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> values;  // n·k values of `source`
  std::vector<LlamaGoldenTarget> targets;
};

inline kernels::DType llama_golden_dtype(const std::string& name) {
  using kernels::DType;
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q5_0, DType::q4_k,
                  DType::q5_k, DType::q6_k}) {
    if (name == kernels::dtype_name(d)) return d;
  }
  ADD_FAILURE() << "unknown dtype " << name;
  return kernels::DType::f32;
}

inline std::vector<LlamaGolden> load_llama_goldens(const std::string& path) {
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
    g.source = llama_golden_dtype(text(8));
    g.n = u32();
    g.k = u32();
    g.values.resize(static_cast<size_t>(g.n * g.k) * kernels::dtype_size(g.source));
    f.read(reinterpret_cast<char*>(g.values.data()), static_cast<std::streamsize>(g.values.size()));
    for (uint32_t t = 0, targets = u32(); t < targets && f.good(); ++t) {
      LlamaGoldenTarget tg{llama_golden_dtype(text(8)), {}};
      tg.blocks.resize(u32());
      f.read(reinterpret_cast<char*>(tg.blocks.data()), static_cast<std::streamsize>(tg.blocks.size()));
      g.targets.push_back(std::move(tg));
    }
    out.push_back(std::move(g));
  }
  EXPECT_TRUE(f.good()) << path << " is truncated";
  return out;
}

}  // namespace tandem::testing
