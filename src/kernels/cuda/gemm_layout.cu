// gemm_layout.cu — the relaid weight layout (ADR 0057; kernels/cuda_ops.h):
// natural rows → per 32-k chunk, the chain's k16 step 0 then step 1
// (gemm_kernel.cuh's fixed assignment of k to steps), rows padded to a
// multiple of 32 k with zeros.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

// Relaid 8-byte unit u (0..7) of a chunk: step t = u / 4, group q = u % 4,
// k 8q + 4t .. 8q + 4t + 3 — natural unit 2q + t.
__host__ __device__ inline int natural_unit(int u) { return 2 * (u & 3) + (u >> 2); }

// One thread per relaid 8-byte unit: 4 bf16 (k is a multiple of 8, so a unit
// is either all inside the row or all past its end).
__global__ void relay_kernel(const uint16_t* __restrict__ w, int64_t n, int64_t k, int64_t pitch,
                             uint16_t* __restrict__ out) {
  pdl_enter();
  const int64_t units_per_row = pitch / 4, total = n * units_per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / units_per_row, unit = i % units_per_row;
    const int64_t col = (unit / 8) * 32 + natural_unit(static_cast<int>(unit % 8)) * 4;
    uint2 v = make_uint2(0, 0);
    if (col < k) v = *reinterpret_cast<const uint2*>(w + row * k + col);
    *reinterpret_cast<uint2*>(out + row * pitch + unit * 4) = v;
  }
}

// f32 rows → bf16 relaid rows (round to nearest even, as to_bf16).
__global__ void to_bf16_relaid_kernel(const float* x, int64_t m, int64_t k, int64_t pitch,
                                      uint16_t* __restrict__ out) {
  pdl_enter();
  const int64_t units_per_row = pitch / 4, total = m * units_per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / units_per_row, unit = i % units_per_row;
    const int64_t col = (unit / 8) * 32 + natural_unit(static_cast<int>(unit % 8)) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (col < k) v = *reinterpret_cast<const float4*>(x + row * k + col);
    __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 o;
    o.x = *reinterpret_cast<uint32_t*>(&a);
    o.y = *reinterpret_cast<uint32_t*>(&b);
    *reinterpret_cast<uint2*>(out + row * pitch + unit * 4) = o;
  }
}

}  // namespace

Status to_bf16_relaid(const Stream& stream, const float* x, int64_t m, int64_t k, uint16_t* out) {
  if (m < 0 || k <= 0 || k % 8 != 0)
    return invalid_argument("to_bf16_relaid: need m >= 0, k > 0 and k % 8 == 0");
  if (m == 0) return Status::Ok();
  const int64_t total = m * (relaid_row_pitch(k) / 4);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65535 * 8));
  return launch_kernel("to_bf16_relaid", to_bf16_relaid_kernel, dim3(blocks), dim3(256), 0, stream.handle(),
                       x, m, k, relaid_row_pitch(k), out);
}

int64_t relaid_row_pitch(int64_t k) { return (k + 31) / 32 * 32; }

void relay_weights_bf16_host(const uint16_t* w, int64_t n, int64_t k, uint16_t* relaid) {
  const int64_t pitch = relaid_row_pitch(k);
  for (int64_t row = 0; row < n; ++row)
    for (int64_t unit = 0; unit < pitch / 4; ++unit) {
      const int64_t col = (unit / 8) * 32 + natural_unit(static_cast<int>(unit % 8)) * 4;
      for (int e = 0; e < 4; ++e)
        relaid[row * pitch + unit * 4 + e] = col + e < k ? w[row * k + col + e] : uint16_t{0};
    }
}

Status relay_weights_bf16(const Stream& stream, const uint16_t* w, int64_t n, int64_t k, uint16_t* relaid) {
  if (n <= 0 || k <= 0 || k % 8 != 0)
    return invalid_argument("relay_weights_bf16: need n > 0, k > 0 and k % 8 == 0 (got n=" +
                            std::to_string(n) + ", k=" + std::to_string(k) + ")");
  if ((reinterpret_cast<uintptr_t>(w) & 7u) != 0 || (reinterpret_cast<uintptr_t>(relaid) & 7u) != 0)
    return invalid_argument("relay_weights_bf16: w and relaid must be 8-byte aligned");
  const int64_t total = n * (relaid_row_pitch(k) / 4);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65535 * 8));
  return launch_kernel("relay_weights_bf16", relay_kernel, dim3(blocks), dim3(256), 0, stream.handle(), w, n,
                       k, relaid_row_pitch(k), relaid);
}

}  // namespace tandem::kernels::gpu
