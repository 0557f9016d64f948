// tandem's kernels::quantize against llama.cpp's bytes in the file
// tools/quant_check/llama_cpp_bulk.py writes (usage there: tandem-quant-check [FILE]). Prints the
// differing bytes and the time per value for each set and type; exits
// non-zero if any byte differs.
#include <chrono>
#include <cstdio>
#include <vector>

#include "kernels/ops.h"

using namespace tandem::kernels;

int main(int argc, char** argv) {
  std::FILE* f = std::fopen(argc > 1 ? argv[1] : "/tmp/llama_cpp_bulk.bin", "rb");
  if (f == nullptr) return 2;
  const int64_t n = 1 << 20;
  const char* sets[] = {"normal", "t3", "uniform", "bf16normal", "extremes"};
  const DType types[] = {DType::q4_k, DType::q8_0, DType::q4_0, DType::q5_0, DType::q6_k};
  int bad = 0;
  for (const char* s : sets) {
    std::vector<float> x(n);
    if (std::fread(x.data(), 4, n, f) != static_cast<size_t>(n)) return 2;
    for (DType t : types) {
      std::vector<uint8_t> want(dtype_row_bytes(t, n)), got(want.size());
      if (std::fread(want.data(), 1, want.size(), f) != want.size()) return 2;
      const auto start = std::chrono::steady_clock::now();
      quantize(x.data(), t, n, got.data());
      const double ns =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
      size_t diff = 0;
      for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want[i];
      std::printf("%-10s %-5s %6zu blocks, %zu bytes differ, %.1f ns per value (one thread)\n", s,
                  dtype_name(t), want.size() / dtype_block_bytes(t), diff, ns / static_cast<double>(n));
      bad += diff != 0;
    }
  }
  std::fclose(f);
  return bad == 0 ? 0 : 1;
}
