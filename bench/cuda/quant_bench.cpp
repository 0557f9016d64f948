// quant_bench.cpp — bench_cuda_gemm --quant: the quantized GEMM (ADR 0077,
// kernels::gpu::gemm_quant) at the Llama-3.2-1B and Llama-3.1-8B forward's
// projection shapes, q8_0 / q4_k / q6_k, M = 1 (decode), 4 (a verify block)
// and 512 (prefill). Per point: microseconds per call (the activation
// quantizer included where the GEMM does not quantize its rows itself), GB/s
// of packed weights streamed and their share of this run's read ceiling, and
// whether rows 0 and M - 1 equal the same rows computed alone (bitwise).
// Weights: random codes with sane f16 scales (the timing does not depend on
// the values), packed by the CPU's PackedMatrix, uploaded byte for byte and
// rotated over enough copies (>= 256 MiB) that repeated calls miss the L2.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "bench_util.h"
#include "kernels/ops.h"

namespace tandem::bench {
namespace {

using kernels::DType;
namespace gpu = kernels::gpu;

// n rows of random GGUF blocks of `dtype` whose f16 scales are small normal numbers.
std::vector<uint8_t> random_rows(DType dtype, int64_t n, int64_t k) {
  std::vector<uint8_t> rows(static_cast<size_t>(n) * kernels::dtype_row_bytes(dtype, k));
  std::mt19937 rng(static_cast<uint32_t>(n * 7 + k));
  for (uint8_t& b : rows) b = static_cast<uint8_t>(rng());
  const size_t block = kernels::dtype_block_bytes(dtype);
  // Offsets of the f16 fields in one block (GGUF): q8_0 d; q4_k d, dmin; q6_k d (last).
  const std::vector<size_t> f16s = dtype == DType::q8_0   ? std::vector<size_t>{0}
                                   : dtype == DType::q4_k ? std::vector<size_t>{0, 2}
                                                          : std::vector<size_t>{block - 2};
  for (size_t b = 0; b < rows.size(); b += block) {
    for (const size_t off : f16s) {
      const uint16_t h = static_cast<uint16_t>(0x1400 | (rng() & 0x3FF));
      std::memcpy(rows.data() + b + off, &h, 2);
    }
  }
  return rows;
}

void run_point(const char* model, const char* what, DType dtype, int64_t n, int64_t k,
               const gpu::Stream& stream, const Ceilings& ceil) {
  const kernels::PackedMatrix packed =
      kernels::PackedMatrix::pack(random_rows(dtype, n, k).data(), dtype, n, k);
  const size_t bytes = packed.data_bytes();
  const int sets = std::clamp(static_cast<int>((size_t{256} << 20) / bytes) + 1, 1, 16);
  std::vector<gpu::DeviceBuffer> w;
  for (int i = 0; i < sets; ++i) {
    w.push_back(allocate(bytes));
    check(w.back().upload(packed.data(), bytes, stream));
  }
  const int64_t max_m = 512;
  std::vector<float> xf(static_cast<size_t>(max_m * k));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& f : xf) f = dist(rng);
  gpu::DeviceBuffer x = allocate(xf.size() * sizeof(float));
  check(x.upload(xf.data(), xf.size() * sizeof(float), stream));
  gpu::DeviceBuffer blocks = allocate(gpu::quant_act_bytes(max_m, k));
  gpu::DeviceBuffer y = allocate(static_cast<size_t>(max_m * n) * sizeof(float));
  gpu::DeviceBuffer y1 = allocate(static_cast<size_t>(n) * sizeof(float));
  const auto call = [&](const float* xr, int64_t m, const gpu::DeviceBuffer& wi, float* out) {
    if (m > gpu::quant_fused_max_rows()) check(gpu::quantize_act_rows(stream, xr, m, k, blocks.data()));
    check(gpu::gemm_quant(stream, xr, blocks.data(), m, wi.as<uint8_t>(), dtype, n, k, out, n));
  };
  for (const int64_t m : {int64_t{1}, int64_t{4}, max_m}) {
    const double us =
        time_us([&](int i) { call(x.as<float>(), m, w[i % sets], y.as<float>()); }, stream.handle());
    bool invariant = true;
    call(x.as<float>(), m, w[0], y.as<float>());
    std::vector<float> in_batch(static_cast<size_t>(n)), alone(static_cast<size_t>(n));
    for (const int64_t r : {int64_t{0}, m - 1}) {
      check(y.download(in_batch.data(), in_batch.size() * 4, stream, static_cast<size_t>(r * n) * 4));
      call(x.as<float>() + r * k, 1, w[0], y1.as<float>());
      check(y1.download(alone.data(), alone.size() * 4, stream));
      invariant = invariant && std::memcmp(alone.data(), in_batch.data(), alone.size() * 4) == 0;
    }
    const double gbs = static_cast<double>(packed.weight_bytes()) / us / 1e3;
    std::printf("%-4s %-7s %-5s %6lld %6lld %4lld %9.2f %9.0f %7.1f%%  %s\n", model, what,
                kernels::dtype_name(dtype), static_cast<long long>(n), static_cast<long long>(k),
                static_cast<long long>(m), us, gbs, 100.0 * gbs / ceil.read_gbs, invariant ? "yes" : "NO");
  }
}

}  // namespace

void run_quant_shapes(const gpu::Stream& stream, const Ceilings& ceil) {
  std::printf("%-4s %-7s %-5s %6s %6s %4s %9s %9s %8s  %s\n", "", "matrix", "type", "N", "K", "M", "us",
              "GB/s", "of_read", "rows==alone");
  struct Point {
    const char* model;
    const char* what;
    int64_t n, k;
  };
  const Point points[] = {{"1B", "qkv", 3072, 2048},      {"1B", "o", 2048, 2048},
                          {"1B", "gate_up", 16384, 2048}, {"1B", "down", 2048, 8192},
                          {"8B", "qkv", 6144, 4096},      {"8B", "o", 4096, 4096},
                          {"8B", "gate_up", 28672, 4096}, {"8B", "down", 4096, 14336}};
  for (const DType dtype : {DType::q4_k, DType::q8_0, DType::q6_k}) {
    for (const Point& p : points) run_point(p.model, p.what, dtype, p.n, p.k, stream, ceil);
  }
  std::printf("GB/s: packed weight bytes (padding excluded) per call; of_read = GB/s / read ceiling.\n");
}

}  // namespace tandem::bench
