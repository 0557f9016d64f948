// rowwise.cu — RMSNorm, SiLU·mul and RoPE on the device (kernels/cuda_ops.h).
// Row-wise ops run one block of a fixed size per row, so a row's reduction
// order (thread-strided partial sums in index order, then a fixed shuffle
// tree) is the same whatever the number of rows. The library is compiled with
// --fmad=false: every product and sum below rounds separately, as written.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "cuda/qkv_values.cuh"
#include "cuda/rms_row.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kRowThreads = kRmsThreads;
constexpr int kMaxRopeHeadDim = 512;

__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_kernel(const float* x, const float* __restrict__ weight, float* y, int64_t dim, float eps) {
  pdl_enter();
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  const float inv = rms_inverse_of_row(xr, dim, eps);
  // Every thread has read the row's sum before any thread could write y (in place is safe:
  // each thread rewrites only the elements it read).
  for (int64_t i = threadIdx.x; i < dim; i += kRowThreads) yr[i] = (xr[i] * inv) * weight[i];
}

__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, int64_t count) {
  pdl_enter();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float g = gate[i];
    out[i] = (g / (1.0f + expf(-g))) * up[i];
  }
}

__global__ void rope_kernel(float* x, int n_heads, int head_dim, const int32_t* __restrict__ positions,
                            const float* __restrict__ inv_freq, int rotary_dim, bool neox) {
  __shared__ float cos_s[kMaxRopeHeadDim / 2], sin_s[kMaxRopeHeadDim / 2];
  pdl_enter();
  const int half = rotary_dim / 2;
  // One f32 rounding of the angle (as transformers' f32 outer product), then
  // cos/sin in double rounded once: the CPU rope()'s convention.
  rope_table(static_cast<float>(positions[blockIdx.x]), inv_freq, half, cos_s, sin_s);
  __syncthreads();
  float* row = x + static_cast<int64_t>(blockIdx.x) * n_heads * head_dim;
  for (int idx = threadIdx.x; idx < n_heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    float* v = row + static_cast<int64_t>(h) * head_dim;
    int ia, ib;
    rope_pair(i, half, neox, ia, ib);
    rope_rotated(v[ia], v[ib], cos_s[i], sin_s[i], v[ia], v[ib]);
  }
}

}  // namespace

Status rmsnorm(const Stream& stream, const float* x, const float* weight, float* y, int64_t rows, int64_t dim,
               float eps) {
  if (rows < 0 || dim <= 0 || rows > 0x7fffffffLL) {
    return invalid_argument("rmsnorm: need 0 <= rows < 2^31 and dim > 0 (got rows=" + std::to_string(rows) +
                            ", dim=" + std::to_string(dim) + ")");
  }
  if (rows == 0) return Status::Ok();
  return launch_kernel("rmsnorm", rmsnorm_kernel, dim3(static_cast<unsigned>(rows)), dim3(kRowThreads), 0,
                       stream.handle(), x, weight, y, dim, eps);
}

Status silu_mul(const Stream& stream, const float* gate, const float* up, float* out, int64_t count) {
  if (count < 0) return invalid_argument("silu_mul: negative count " + std::to_string(count));
  if (count == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, 65536);
  return launch_kernel("silu_mul", silu_mul_kernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0,
                       stream.handle(), gate, up, out, count);
}

Status rope(const Stream& stream, float* x, int64_t rows, int n_heads, int head_dim, const int32_t* positions,
            const float* inv_freq, int rotary_dim, RopeLayout layout) {
  if (rows < 0 || rows > 0x7fffffffLL || n_heads <= 0 || head_dim <= 0 || head_dim > kMaxRopeHeadDim ||
      rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim) {
    return invalid_argument(
        "rope: need n_heads > 0, 0 < rotary_dim <= head_dim <= " + std::to_string(kMaxRopeHeadDim) +
        ", rotary_dim even (got n_heads=" + std::to_string(n_heads) +
        ", head_dim=" + std::to_string(head_dim) + ", rotary_dim=" + std::to_string(rotary_dim) + ")");
  }
  if (rows == 0) return Status::Ok();
  return launch_kernel("rope", rope_kernel, dim3(static_cast<unsigned>(rows)), dim3(128), 0, stream.handle(),
                       x, n_heads, head_dim, positions, inv_freq, rotary_dim, layout == RopeLayout::neox);
}

}  // namespace tandem::kernels::gpu
