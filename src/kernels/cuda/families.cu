// families.cu — the Gemma and sparse-MoE glue of the forward on the device
// (kernels/cuda_family_ops.h, ADR 0045). Element-wise kernels use grid-stride
// loops; the router runs one thread per row (a few dozen experts: serial
// work, in the CPU's order), so a row's bits never depend on the batch.
// Compiled with --fmad=false like the rest of the library.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "kernels/cuda_family_ops.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxExperts = 512;

unsigned grid_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

__device__ __forceinline__ int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void scale_kernel(float* x, int64_t count, float scale) {
  for (int64_t i = global_index(); i < count; i += grid_stride()) x[i] = x[i] * scale;
}

__global__ void softcap_kernel(float* x, int64_t count, float cap) {
  for (int64_t i = global_index(); i < count; i += grid_stride()) x[i] = tanhf(x[i] / cap) * cap;
}

__global__ void sigmoid_kernel(float* x, int64_t count) {
  for (int64_t i = global_index(); i < count; i += grid_stride()) x[i] = 1.0f / (1.0f + expf(-x[i]));
}

// reference::gelu_tanh_gate: 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³)))·up in double, rounded once.
__global__ void gelu_tanh_rows_kernel(const float* gate_up, int64_t inter, float* __restrict__ out) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  const int64_t r = blockIdx.x;
  const float* row = gate_up + r * 2 * inter;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < inter;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const double g = row[i];
    const double inner = kSqrt2OverPi * (g + 0.044715 * g * g * g);
    out[r * inter + i] =
        static_cast<float>(0.5 * g * (1.0 + tanh(inner)) * static_cast<double>(row[inter + i]));
  }
}

__global__ void moe_route_kernel(const float* logits, int64_t rows, int n, int k, bool renormalise,
                                 int32_t* __restrict__ experts, float* __restrict__ weights) {
  const int64_t r = global_index();
  if (r >= rows) return;
  const float* x = logits + r * n;
  float p[kMaxExperts];
  bool taken[kMaxExperts];
  // reference::softmax_row: f32 max, exp in double, double sum, one scale each.
  float mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = fmaxf(mx, x[i]);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const double e = exp(static_cast<double>(x[i]) - mx);
    p[i] = static_cast<float>(e);
    sum += e;
    taken[i] = false;
  }
  const double inv = 1.0 / sum;
  for (int i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] * inv);
  // Top-k by repeated selection: the largest untaken probability, the lowest
  // index on ties (ascending scan, strict >) — the CPU's partial_sort order.
  int32_t* chosen = experts + r * k;
  float top_sum = 0.0f;
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int i = 0; i < n; ++i)
      if (!taken[i] && (best < 0 || p[i] > p[best])) best = i;
    taken[best] = true;
    chosen[j] = best;
    top_sum = top_sum + p[best];  // descending order, as transformers sums the top-k
  }
  // Ascending expert order (insertion sort of k indices).
  for (int j = 1; j < k; ++j) {
    const int32_t e = chosen[j];
    int i = j - 1;
    for (; i >= 0 && chosen[i] > e; --i) chosen[i + 1] = chosen[i];
    chosen[i + 1] = e;
  }
  for (int j = 0; j < k; ++j) weights[r * k + j] = renormalise ? p[chosen[j]] / top_sum : p[chosen[j]];
}

__global__ void scatter_rows_kernel(const float* src, const int32_t* __restrict__ indices, int64_t dim,
                                    float* __restrict__ dst) {
  const int64_t r = blockIdx.x;
  float* row = dst + static_cast<int64_t>(indices[r]) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) row[i] = src[r * dim + i];
}

__global__ void moe_combine_kernel(const float* y, const float* w, int64_t rows, int k, int64_t dim,
                                   const float* shared_scale, const float* shared, float* __restrict__ out) {
  const int64_t count = rows * dim;
  for (int64_t idx = global_index(); idx < count; idx += grid_stride()) {
    const int64_t r = idx / dim, i = idx % dim;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) acc = acc + y[(r * k + j) * dim + i] * w[r * k + j];
    if (shared != nullptr) acc = acc + shared_scale[r] * shared[idx];
    out[idx] = acc;
  }
}

__global__ void copy_columns_kernel(const float* src, int64_t rows, int64_t src_width, int64_t col0,
                                    int64_t n, float* __restrict__ dst) {
  for (int64_t idx = global_index(); idx < rows * n; idx += grid_stride())
    dst[idx] = src[(idx / n) * src_width + col0 + idx % n];
}

__global__ void scale_columns_kernel(float* x, int64_t rows, int64_t dim, const float* __restrict__ scale,
                                     float factor) {
  for (int64_t idx = global_index(); idx < rows * dim; idx += grid_stride())
    x[idx] = (x[idx] * scale[idx % dim]) * factor;
}

__global__ void scale_by_expert_kernel(const int32_t* experts, float* weights, int64_t count,
                                       const float* __restrict__ scale) {
  for (int64_t i = global_index(); i < count; i += grid_stride()) weights[i] = weights[i] * scale[experts[i]];
}

__global__ void add_then_scale_kernel(const float* x, float* y, int64_t count, float factor) {
  for (int64_t i = global_index(); i < count; i += grid_stride()) y[i] = (x[i] + y[i]) * factor;
}

__global__ void gelu_tanh_gate_strided_kernel(float* gate, int64_t rows, int64_t dim, const float* input,
                                              int64_t input_stride) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  for (int64_t idx = global_index(); idx < rows * dim; idx += grid_stride()) {
    const int64_t r = idx / dim, i = idx % dim;
    const double g = gate[idx];
    const double inner = kSqrt2OverPi * (g + 0.044715 * g * g * g);
    gate[idx] =
        static_cast<float>(0.5 * g * (1.0 + tanh(inner)) * static_cast<double>(input[r * input_stride + i]));
  }
}

Status check_rows(int64_t rows, const char* op) {
  if (rows < 0 || rows > 0x7fffffffLL) return invalid_argument(std::string(op) + ": need 0 <= rows < 2^31");
  return Status::Ok();
}

}  // namespace

Status scale_inplace(const Stream& stream, float* x, int64_t count, float scale) {
  if (count <= 0) return Status::Ok();
  scale_kernel<<<grid_for(count), kThreads, 0, stream.handle()>>>(x, count, scale);
  return launch_status("scale_inplace");
}

Status softcap_inplace(const Stream& stream, float* x, int64_t count, float cap) {
  if (!(cap > 0.0f)) return invalid_argument("softcap_inplace: cap must be > 0");
  if (count <= 0) return Status::Ok();
  softcap_kernel<<<grid_for(count), kThreads, 0, stream.handle()>>>(x, count, cap);
  return launch_status("softcap_inplace");
}

Status sigmoid_inplace(const Stream& stream, float* x, int64_t count) {
  if (count <= 0) return Status::Ok();
  sigmoid_kernel<<<grid_for(count), kThreads, 0, stream.handle()>>>(x, count);
  return launch_status("sigmoid_inplace");
}

Status gelu_tanh_rows(const Stream& stream, const float* gate_up, int64_t rows, int64_t inter, float* out) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "gelu_tanh_rows"));
  if (rows == 0 || inter <= 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>(std::min<int64_t>((inter + kThreads - 1) / kThreads, 65535)));
  gelu_tanh_rows_kernel<<<grid, kThreads, 0, stream.handle()>>>(gate_up, inter, out);
  return launch_status("gelu_tanh_rows");
}

Status moe_route(const Stream& stream, const float* logits, int64_t rows, int n_experts, int top_k,
                 bool renormalise, int32_t* experts, float* weights) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "moe_route"));
  if (n_experts <= 0 || n_experts > kMaxExperts || top_k <= 0 || top_k > n_experts)
    return invalid_argument("moe_route: need 0 < top_k <= n_experts <= " + std::to_string(kMaxExperts) +
                            " (got " + std::to_string(top_k) + " of " + std::to_string(n_experts) + ")");
  if (rows == 0) return Status::Ok();
  constexpr int kRouteThreads = 32;  // one row per thread; the per-thread arrays live in local memory
  const unsigned blocks = static_cast<unsigned>((rows + kRouteThreads - 1) / kRouteThreads);
  moe_route_kernel<<<blocks, kRouteThreads, 0, stream.handle()>>>(logits, rows, n_experts, top_k, renormalise,
                                                                  experts, weights);
  return launch_status("moe_route");
}

Status scatter_rows(const Stream& stream, const float* src, const int32_t* indices, int64_t rows, int64_t dim,
                    float* dst) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "scatter_rows"));
  if (rows == 0) return Status::Ok();
  scatter_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream.handle()>>>(src, indices, dim, dst);
  return launch_status("scatter_rows");
}

Status moe_combine(const Stream& stream, const float* y, const float* weights, int64_t rows, int top_k,
                   int64_t dim, const float* shared_scale, const float* shared, float* out) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "moe_combine"));
  if (top_k <= 0) return invalid_argument("moe_combine: top_k must be > 0");
  if (rows == 0 || dim <= 0) return Status::Ok();
  moe_combine_kernel<<<grid_for(rows * dim), kThreads, 0, stream.handle()>>>(y, weights, rows, top_k, dim,
                                                                             shared_scale, shared, out);
  return launch_status("moe_combine");
}

Status copy_columns(const Stream& stream, const float* src, int64_t rows, int64_t src_width, int64_t col0,
                    int64_t n, float* dst) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "copy_columns"));
  if (col0 < 0 || n < 0 || col0 + n > src_width)
    return invalid_argument("copy_columns: columns [" + std::to_string(col0) + ", " +
                            std::to_string(col0 + n) + ") outside a row of " + std::to_string(src_width));
  if (rows == 0 || n == 0) return Status::Ok();
  copy_columns_kernel<<<grid_for(rows * n), kThreads, 0, stream.handle()>>>(src, rows, src_width, col0, n,
                                                                            dst);
  return launch_status("copy_columns");
}

Status scale_columns(const Stream& stream, float* x, int64_t rows, int64_t dim, const float* scale,
                     float factor) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "scale_columns"));
  if (rows == 0 || dim <= 0) return Status::Ok();
  scale_columns_kernel<<<grid_for(rows * dim), kThreads, 0, stream.handle()>>>(x, rows, dim, scale, factor);
  return launch_status("scale_columns");
}

Status scale_by_expert(const Stream& stream, const int32_t* experts, float* weights, int64_t count,
                       const float* scale) {
  if (count <= 0) return Status::Ok();
  scale_by_expert_kernel<<<grid_for(count), kThreads, 0, stream.handle()>>>(experts, weights, count, scale);
  return launch_status("scale_by_expert");
}

Status add_then_scale(const Stream& stream, const float* x, float* y, int64_t count, float factor) {
  if (count <= 0) return Status::Ok();
  add_then_scale_kernel<<<grid_for(count), kThreads, 0, stream.handle()>>>(x, y, count, factor);
  return launch_status("add_then_scale");
}

Status gelu_tanh_gate_strided(const Stream& stream, float* gate, int64_t rows, int64_t dim,
                              const float* input, int64_t input_stride) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "gelu_tanh_gate_strided"));
  if (rows == 0 || dim <= 0) return Status::Ok();
  gelu_tanh_gate_strided_kernel<<<grid_for(rows * dim), kThreads, 0, stream.handle()>>>(gate, rows, dim,
                                                                                        input, input_stride);
  return launch_status("gelu_tanh_gate_strided");
}

}  // namespace tandem::kernels::gpu
