// bench_util.cpp — bench_util.h.
#include "bench_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace tandem::bench {

namespace gpu = kernels::gpu;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_cuda_gemm: %s\n", what.c_str());
  std::exit(1);
}

void check(const Status& st) {
  if (!st.ok()) die(st.to_string());
}

void check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) die(std::string(call) + ": " + cudaGetErrorString(err));
}

gpu::DeviceBuffer allocate(size_t bytes) {
  Expected<gpu::DeviceBuffer> b = gpu::DeviceBuffer::allocate(bytes);
  if (!b.ok()) die(b.status().to_string());
  return std::move(b).value();
}

double time_us(const std::function<void(int)>& f, cudaStream_t stream) {
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) f(i);
  check(cudaEventRecord(e0, stream), "cudaEventRecord");
  for (int i = 0; i < 3; ++i) f(i);
  check(cudaEventRecord(e1, stream), "cudaEventRecord");
  check(cudaEventSynchronize(e1), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
  const double estimate = ms * 1000.0 / 3;
  const int reps = std::clamp(static_cast<int>(std::ceil(3000.0 / std::max(estimate, 1.0))), 3, 500);
  std::vector<double> trials;
  for (int t = 0; t < 7; ++t) {
    check(cudaEventRecord(e0, stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) f(i);
    check(cudaEventRecord(e1, stream), "cudaEventRecord");
    check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    trials.push_back(ms * 1000.0 / reps);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(trials.begin(), trials.end());
  return trials[trials.size() / 2];
}

Ceilings measure_ceilings(const gpu::Stream& stream) {
  const size_t bytes = size_t{2} << 30;
  gpu::DeviceBuffer a = allocate(bytes), b = allocate(bytes);
  check(a.fill_bytes(0x3c, stream));
  check(b.fill_bytes(0x3c, stream));
  Ceilings c;
  const double copy_us = time_us(
      [&](int) {
        check(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream.handle()),
              "cudaMemcpyAsync");
      },
      stream.handle());
  c.copy_gbs = 2.0 * bytes / copy_us / 1e3;
  const Expected<double> read = gpu::measure_read_bandwidth(stream, bytes, 10);
  if (!read.ok()) die(read.status().to_string());
  c.read_gbs = *read / 1e9;
  return c;
}

}  // namespace tandem::bench
