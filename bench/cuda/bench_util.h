// bench_util.h — what bench_cuda_gemm's parts share: fatal errors, device
// buffers, CUDA-event timing and the device-memory ceilings of this run.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "kernels/cuda_ops.h"

namespace tandem::bench {

[[noreturn]] void die(const std::string& what);
void check(const Status& st);
void check(cudaError_t err, const char* call);
kernels::gpu::DeviceBuffer allocate(size_t bytes);

// Median microseconds per call of f(i) (i = call index, for rotation): CUDA
// events around R back-to-back calls (R chosen for >= 3 ms), 7 trials.
double time_us(const std::function<void(int)>& f, cudaStream_t stream);

struct Ceilings {
  double copy_gbs = 0, read_gbs = 0;
};
// copy: cudaMemcpy device-to-device of 2 GiB (bytes read + written / time);
// read: the library's measure_read_bandwidth (the one `tandem bench --device
// cuda` divides decode by) on its own 2 GiB buffer.
Ceilings measure_ceilings(const kernels::gpu::Stream& stream);

// --quant: the quantized GEMM (ADR 0077) at the forward's shapes (quant_bench.cpp).
void run_quant_shapes(const kernels::gpu::Stream& stream, const Ceilings& ceil);

}  // namespace tandem::bench
