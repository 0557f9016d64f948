// bandwidth.cu — the device's read bandwidth, measured (kernels/cuda_ops.h):
// the ceiling `tandem bench --device cuda` divides decode by. A grid-stride
// kernel reads every 16-byte vector of a buffer far larger than L2 once (four
// loads in flight per thread) and writes one float per thread so the loads
// stay; timed with CUDA events, best of `passes`.
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/cuda_check.h"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

__global__ void read_all_kernel(const float4* __restrict__ p, size_t count, float* __restrict__ sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const float4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
    acc += (a.x + b.y) + (c.z + d.w);
  }
  for (; i < count; i += stride) acc += p[i].x;
  sink[static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = acc;
}

// One timed read of the whole buffer: milliseconds, or the first CUDA error.
Expected<float> time_one_read(const Stream& stream, cudaEvent_t start, cudaEvent_t stop, const float4* data,
                              size_t count, float* sink, int blocks, int threads) {
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaEventRecord(start, stream.handle()), "cudaEventRecord"));
  read_all_kernel<<<blocks, threads, 0, stream.handle()>>>(data, count, sink);
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), "read_all_kernel"));
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaEventRecord(stop, stream.handle()), "cudaEventRecord"));
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(stop), "measure_read_bandwidth"));
  float ms = 0;
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime"));
  return ms;
}

}  // namespace

Expected<double> measure_read_bandwidth(const Stream& stream, size_t bytes, int passes) {
  int device = 0, sms = 0;
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                                     "cudaDeviceGetAttribute"));
  bytes = bytes / 16 * 16;
  auto data = DeviceBuffer::allocate(bytes);
  if (!data.ok()) return data.status();
  const int blocks = sms * 8, threads = 512;
  auto sink = DeviceBuffer::allocate(sizeof(float) * blocks * threads);
  if (!sink.ok()) return sink.status();
  TANDEM_RETURN_IF_ERROR(data->fill_bytes(1, stream));
  cudaEvent_t start = nullptr, stop = nullptr;
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&start), "cudaEventCreate"));
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&stop), "cudaEventCreate"));
  double best = 0;
  for (int p = 0; p <= passes; ++p) {  // pass 0 warms up
    const Expected<float> ms = time_one_read(stream, start, stop, data->as<const float4>(), bytes / 16,
                                             sink->as<float>(), blocks, threads);
    if (!ms.ok()) {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      return ms.status();
    }
    if (p > 0 && *ms > 0) best = std::max(best, static_cast<double>(bytes) / (*ms * 1e-3));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace tandem::kernels::gpu
