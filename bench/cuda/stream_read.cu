// stream_read.cu — the read-bandwidth ceiling for bench_cuda_gemm: a grid-stride
// kernel that reads every 16-byte vector of a buffer once (4 loads in flight per
// thread) and writes one float per thread so the loads cannot be dropped.
#include <cuda_runtime.h>

#include "stream_read.h"

namespace tandem::bench {
namespace {

__global__ void read_kernel(const float4* __restrict__ p, size_t count, float* __restrict__ sink) {
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

}  // namespace

int read_sink_floats(int multiprocessors) { return multiprocessors * 8 * 512; }

cudaError_t launch_stream_read(const void* data, size_t bytes, float* sink, int multiprocessors,
                               cudaStream_t stream) {
  read_kernel<<<multiprocessors * 8, 512, 0, stream>>>(static_cast<const float4*>(data), bytes / 16, sink);
  return cudaGetLastError();
}

}  // namespace tandem::bench
