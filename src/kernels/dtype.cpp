// dtype.cpp — dtype helpers and the small ops that only convert or scan:
// to_f32, embedding, argmax.
#include <cmath>
#include <string>

#include "core/check.h"
#include "kernel_table.h"
#include "quant/formats.h"

namespace tandem::kernels {

size_t dtype_size(DType dtype) {
  TANDEM_CHECK(!dtype_is_quantized(dtype) && "dtype_size of a block type: use dtype_row_bytes");
  return dtype == DType::f32 ? 4 : 2;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::q8_0:
      return "q8_0";
    case DType::q4_0:
      return "q4_0";
    case DType::q4_k:
      return "q4_k";
    case DType::q5_k:
      return "q5_k";
    case DType::q6_k:
      return "q6_k";
    case DType::q5_0:
      return "q5_0";
  }
  return "?";
}

bool dtype_is_quantized(DType dtype) {
  return dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16;
}

int64_t dtype_block_elems(DType dtype) {
  switch (dtype) {
    case DType::q8_0:
    case DType::q4_0:
    case DType::q5_0:
      return quant::kSmallBlock;
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
      return quant::kSuperBlock;
    default:
      return 1;
  }
}

size_t dtype_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::q8_0:
      return 34;
    case DType::q4_0:
      return 18;
    case DType::q4_k:
      return 144;
    case DType::q5_k:
      return 176;
    case DType::q6_k:
      return 210;
    case DType::q5_0:
      return 22;
  }
  return 0;
}

size_t dtype_row_bytes(DType dtype, int64_t k) {
  const int64_t be = dtype_block_elems(dtype);
  TANDEM_CHECK(k >= 0 && k % be == 0);
  return static_cast<size_t>(k / be) * dtype_block_bytes(dtype);
}

Status check_matrix_shape(DType dtype, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) {
    return invalid_argument("a " + std::string(dtype_name(dtype)) +
                            " matrix needs positive dimensions, got [" + std::to_string(n) + ", " +
                            std::to_string(k) + "]");
  }
  const int64_t be = dtype_block_elems(dtype);
  if (k % be != 0) {
    return invalid_argument(std::string(dtype_name(dtype)) + " stores rows in blocks of " +
                            std::to_string(be) + " elements, but a row has " + std::to_string(k) +
                            " (not a multiple of " + std::to_string(be) + ")");
  }
  return Status::Ok();
}

void to_f32(const void* src, DType dtype, int64_t count, float* dst) {
  if (dtype_is_quantized(dtype)) {
    quant::dequantize(dtype, static_cast<const uint8_t*>(src), count, dst);
    return;
  }
  // Widening conversions are exact, so every variant gives the same bits.
  kernels_for(active_isa()).to_f32(src, dtype, count, dst);
}

void embedding(const Ctx& ctx, const void* table, DType dtype, int64_t dim, const int32_t* ids, int64_t rows,
               float* out) {
  const KernelTable& kt = kernels_for(ctx.isa);
  const auto* base = static_cast<const uint8_t*>(table);
  const size_t row_bytes = dtype_row_bytes(dtype, dim);
  for (int64_t r = 0; r < rows; ++r) {
    TANDEM_CHECK(ids[r] >= 0);
    const uint8_t* row = base + static_cast<size_t>(ids[r]) * row_bytes;
    if (dtype_is_quantized(dtype)) {
      quant::dequantize(dtype, row, dim, out + r * dim);
    } else {
      kt.to_f32(row, dtype, dim, out + r * dim);
    }
  }
}

// Two passes over blocks of kArgmaxLanes, written so that the compiler keeps
// them in vector registers (element-wise selects and an OR, no early exit
// inside a block): the largest value (NaN never replaces one: x > m is false),
// then the first block holding it and the first index in that block. The
// same index as the one-pass scan "x[i] > best" (lowest index on ties; +0 and
// -0 tie; all NaN: 0; all -inf or NaN: the first -inf), 2-4x faster on a
// 150k-entry vocabulary (ADR 0056: it runs on the host once per decode step).
int32_t argmax(const float* x, int64_t n) {
  constexpr int kArgmaxLanes = 16;
  float lane[kArgmaxLanes];
  for (int j = 0; j < kArgmaxLanes; ++j) lane[j] = -INFINITY;
  int64_t i = 0;
  for (; i + kArgmaxLanes <= n; i += kArgmaxLanes)
    for (int j = 0; j < kArgmaxLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  float best = -INFINITY;
  for (int j = 0; j < kArgmaxLanes; ++j) best = lane[j] > best ? lane[j] : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  i = 0;
  for (; i + kArgmaxLanes <= n; i += kArgmaxLanes) {
    int hit = 0;
    for (int j = 0; j < kArgmaxLanes; ++j) hit |= x[i + j] == best ? 1 : 0;
    if (hit != 0) break;
  }
  for (; i < n; ++i)
    if (x[i] == best) return static_cast<int32_t>(i);
  return 0;  // every value NaN
}

int32_t greedy_pick(const float* x, int64_t n) {
  if (n <= 0) return -1;
  const int32_t i = argmax(x, n);
  return x[i] > -INFINITY ? i : -1;
}

}  // namespace tandem::kernels
