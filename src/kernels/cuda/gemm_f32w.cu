// gemm_f32w.cu — the GEMM over f32 weights (kernels/cuda_ops.h): the MoE
// routers and shared-expert gates llama.cpp's converter keeps in F32 (ADR 0080).
// Every output is one chain acc = fma(x[k], w[k], acc) over k = 0, 1, … from
// acc = 0 — the CPU's AVX2 / AVX-512 panel chain — whatever m or the block
// a row lands in, so a row's bits do not depend on the batch. The matrices are
// small (experts × hidden): the kernel is plain, a block of 32 outputs × 8 rows
// staging 32-k tiles of w and x in shared memory (coalesced loads, no bank
// conflicts: the w tile's rows are 33 floats apart). Compiled with --fmad=false.
#include <cuda_runtime.h>

#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kOutputs = 32;  // threadIdx.x: one output each
constexpr int kRows = 8;      // threadIdx.y: one row each
constexpr int kTile = 32;     // k per shared-memory tile

// x is a plain pointer: an earlier kernel wrote it (launch.cuh).
__global__ void __launch_bounds__(kOutputs* kRows)
    gemm_f32w_kernel(const float* x, int64_t m, const float* __restrict__ w, int64_t n, int64_t k, float* y,
                     int64_t ldy) {
  __shared__ float ws[kOutputs][kTile + 1];
  __shared__ float xs[kRows][kTile + 1];
  pdl_enter();
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kOutputs,
                r0 = static_cast<int64_t>(blockIdx.y) * kRows;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    const int64_t kk = k0 + tx;
#pragma unroll
    for (int e = ty; e < kOutputs; e += kRows) {
      const int64_t j = j0 + e;
      ws[e][tx] = j < n && kk < k ? w[j * k + kk] : 0.0f;
    }
    const int64_t r = r0 + ty;
    xs[ty][tx] = r < m && kk < k ? x[r * k + kk] : 0.0f;
    __syncthreads();
    const int64_t left = k - k0;
    const int count = left < kTile ? static_cast<int>(left) : kTile;
    for (int t = 0; t < count; ++t) acc = fmaf(xs[ty][t], ws[tx][t], acc);
    __syncthreads();
  }
  const int64_t j = j0 + tx, r = r0 + ty;
  if (j < n && r < m) y[r * ldy + j] = acc;
}

}  // namespace

Status gemm_f32w(const Stream& stream, const float* x, int64_t m, const float* w, int64_t n, int64_t k,
                 float* y, int64_t ldy) {
  if (m < 0 || n <= 0 || k <= 0 || ldy < n)
    return invalid_argument("gemm_f32w: bad shape (m " + std::to_string(m) + ", n " + std::to_string(n) +
                            ", k " + std::to_string(k) + ", ldy " + std::to_string(ldy) + ")");
  if (m == 0) return Status::Ok();
  const int64_t row_blocks = (m + kRows - 1) / kRows, out_blocks = (n + kOutputs - 1) / kOutputs;
  if (row_blocks > 65535 || out_blocks > (int64_t{1} << 31) - 1)
    return invalid_argument("gemm_f32w: m " + std::to_string(m) + " or n " + std::to_string(n) +
                            " is too large");
  if (x == nullptr || w == nullptr || y == nullptr) return invalid_argument("gemm_f32w: a null buffer");
  return launch_kernel("gemm_f32w", gemm_f32w_kernel,
                       dim3(static_cast<unsigned>(out_blocks), static_cast<unsigned>(row_blocks)),
                       dim3(kOutputs, kRows), 0, stream.handle(), x, m, w, n, k, y, ldy);
}

}  // namespace tandem::kernels::gpu
