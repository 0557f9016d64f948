// elementwise.cu — the small glue ops of the model forward on the device
// (kernels/cuda_ops.h): embedding lookup, bias and residual adds, the q/k/v
// split of the fused projection, SwiGLU over fused gate/up rows and the row
// gather before the LM head. Each output element is a function of its own
// inputs only (no reduction), so none of them can depend on the batch.
// Compiled with --fmad=false like the rest of the library.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/bf16_bits.cuh"
#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

__global__ void embedding_kernel(const uint16_t* __restrict__ table, int64_t dim,
                                 const int32_t* __restrict__ ids, float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int32_t id = ids[r];  // a chained step's -1 (no pick) reads row 0 (ADR 0090)
  const uint16_t* row = table + static_cast<int64_t>(id < 0 ? 0 : id) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[r * dim + i] = __uint_as_float(static_cast<uint32_t>(row[i]) << 16);
}

// The staged row inputs of a graphed step (ADR 0090): five arrays of `rows` of
// `stride`-spaced ints, then table_ints, then rule_words, from page-locked host memory
// the device maps. It never calls pdl_launch_dependents: the step's next kernel is
// scheduled only once this one completes, so every later kernel of the step starts
// after the inputs are in place and may read them before its pdl_wait (launch.cuh).
__global__ void stage_inputs_kernel(const int32_t* __restrict__ src, int32_t* dst, int64_t stride,
                                    int64_t rows, int64_t table_ints, const int32_t* __restrict__ rules_src,
                                    int32_t* rules_dst, int64_t rule_words) {
  pdl_wait();
  const int64_t arrays = 5 * rows, total = arrays + table_ints + rule_words;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i < arrays) {
      const int64_t j = (i / rows) * stride + i % rows;
      dst[j] = src[j];
    } else if (i < arrays + table_ints) {
      const int64_t j = 5 * stride + (i - arrays);
      dst[j] = src[j];
    } else {
      rules_dst[i - arrays - table_ints] = rules_src[i - arrays - table_ints];
    }
  }
}

__global__ void add_bias_kernel(float* y, const float* __restrict__ bias, int64_t rows, int64_t n) {
  pdl_enter();
  const int64_t count = rows * n, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    y[i] = y[i] + bias[i % n];
}

__global__ void add_inplace_kernel(float* y, const float* x, int64_t count) {
  pdl_enter();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    y[i] = y[i] + x[i];
}

__global__ void repeat_cols_kernel(const float* x, int64_t k, int copies, int64_t pitch,
                                   float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.x, width = pitch * copies;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < width;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x)
    out[r * width + i] = i % pitch < k ? x[r * k + i % pitch] : 0.0f;
}

__global__ void split_qkv_kernel(const float* qkv, int64_t q_dim, int64_t kv_dim, float* __restrict__ q,
                                 float* __restrict__ k, float* __restrict__ v) {
  pdl_enter();
  const int64_t r = blockIdx.x, width = q_dim + 2 * kv_dim;
  const float* row = qkv + r * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float value = row[i];
    if (i < q_dim) {
      q[r * q_dim + i] = value;
    } else if (i < q_dim + kv_dim) {
      k[r * kv_dim + i - q_dim] = value;
    } else {
      v[r * kv_dim + i - q_dim - kv_dim] = value;
    }
  }
}

// The CPU reference's formula: the product evaluated in double, rounded once.
__global__ void swiglu_rows_kernel(const float* gate_up, int64_t inter, float* __restrict__ out) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const float* row = gate_up + r * 2 * inter;
  // blockIdx.y picks a 256-wide slice of the row (one element per thread: the
  // double-precision exp is the cost, so spread it over the machine).
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < inter;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const double g = row[i];
    out[r * inter + i] = static_cast<float>(g / (1.0 + exp(-g)) * static_cast<double>(row[inter + i]));
  }
}

__global__ void gather_rows_kernel(const float* src, const int32_t* __restrict__ indices, int64_t dim,
                                   float* __restrict__ dst) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const float* row = src + static_cast<int64_t>(indices[r]) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[r * dim + i] = row[i];
}

__global__ void to_bf16_kernel(const float* x, uint16_t* __restrict__ out, int64_t count) {
  pdl_enter();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = bf16_bits(x[i]);
  }
}

Status check_rows(int64_t rows, const char* op) {
  if (rows < 0 || rows > 0x7fffffffLL) return invalid_argument(std::string(op) + ": need 0 <= rows < 2^31");
  return Status::Ok();
}

}  // namespace

Status embedding_bf16(const Stream& stream, const uint16_t* table, int64_t dim, const int32_t* ids,
                      int64_t rows, float* out) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "embedding_bf16"));
  if (rows == 0) return Status::Ok();
  return launch_kernel("embedding_bf16", embedding_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads),
                       0, stream.handle(), table, dim, ids, out);
}

Status add_bias(const Stream& stream, float* y, const float* bias, int64_t rows, int64_t n) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "add_bias"));
  if (rows == 0 || n == 0) return Status::Ok();
  return launch_kernel("add_bias", add_bias_kernel, grid_for(rows * n), dim3(kThreads), 0, stream.handle(), y,
                       bias, rows, n);
}

Status add_inplace(const Stream& stream, float* y, const float* x, int64_t count) {
  if (count <= 0) return Status::Ok();
  return launch_kernel("add_inplace", add_inplace_kernel, grid_for(count), dim3(kThreads), 0, stream.handle(),
                       y, x, count);
}

Status repeat_cols(const Stream& stream, const float* x, int64_t rows, int64_t k, int copies, int64_t pitch,
                   float* out) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "repeat_cols"));
  if (k <= 0 || copies <= 0 || pitch < k)
    return invalid_argument("repeat_cols: bad shape (k " + std::to_string(k) + ", copies " +
                            std::to_string(copies) + ", pitch " + std::to_string(pitch) + ")");
  if (rows == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>(std::min<int64_t>((pitch * copies + kThreads - 1) / kThreads, 4096)));
  return launch_kernel("repeat_cols", repeat_cols_kernel, grid, dim3(kThreads), 0, stream.handle(), x, k,
                       copies, pitch, out);
}

Status split_qkv(const Stream& stream, const float* qkv, int64_t rows, int64_t q_dim, int64_t kv_dim,
                 float* q, float* k, float* v) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "split_qkv"));
  if (rows == 0) return Status::Ok();
  return launch_kernel("split_qkv", split_qkv_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0,
                       stream.handle(), qkv, q_dim, kv_dim, q, k, v);
}

Status swiglu_rows(const Stream& stream, const float* gate_up, int64_t rows, int64_t inter, float* out) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "swiglu_rows"));
  if (rows == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>(std::min<int64_t>((inter + kThreads - 1) / kThreads, 65535)));
  return launch_kernel("swiglu_rows", swiglu_rows_kernel, grid, dim3(kThreads), 0, stream.handle(), gate_up,
                       inter, out);
}

Status to_bf16(const Stream& stream, const float* x, uint16_t* out, int64_t count) {
  if (count <= 0) return Status::Ok();
  return launch_kernel("to_bf16", to_bf16_kernel, grid_for(count), dim3(kThreads), 0, stream.handle(), x, out,
                       count);
}

Status stage_inputs(const Stream& stream, const int32_t* src, int32_t* dst, int64_t stride, int64_t rows,
                    int64_t table_ints, const void* rules_src, void* rules_dst, int64_t rule_bytes) {
  if (rows < 0 || rows > stride || table_ints < 0 || rule_bytes < 0 || rule_bytes % 4 != 0)
    return invalid_argument("stage_inputs: bad sizes (rows " + std::to_string(rows) + ", stride " +
                            std::to_string(stride) + ", table ints " + std::to_string(table_ints) +
                            ", rule bytes " + std::to_string(rule_bytes) + ")");
  const int64_t total = 5 * rows + table_ints + rule_bytes / 4;
  if (total == 0) return Status::Ok();
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 8));
  return launch_kernel("stage_inputs", stage_inputs_kernel, dim3(blocks), dim3(kThreads), 0, stream.handle(),
                       src, dst, stride, rows, table_ints, static_cast<const int32_t*>(rules_src),
                       static_cast<int32_t*>(rules_dst), rule_bytes / 4);
}

Status gather_rows(const Stream& stream, const float* src, const int32_t* indices, int64_t rows, int64_t dim,
                   float* dst) {
  TANDEM_RETURN_IF_ERROR(check_rows(rows, "gather_rows"));
  if (rows == 0) return Status::Ok();
  return launch_kernel("gather_rows", gather_rows_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads),
                       0, stream.handle(), src, indices, dim, dst);
}

}  // namespace tandem::kernels::gpu
