// cuda_test_util.h — shared helpers for the CUDA kernel tests: skip without a
// device, upload/download vectors, deterministic random data, bf16 rounding.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dtype_convert.h"
#include "kernels/cuda_ops.h"
#include "kernels/ops.h"

// Skips the test (reported as passed/skipped) when no CUDA device is visible:
// CI and the development machines have none.
#define TANDEM_REQUIRE_CUDA_DEVICE()                                                            \
  do {                                                                                          \
    if (::tandem::kernels::gpu::device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device"; \
  } while (0)

namespace tandem::kernels::gpu::testing {

template <typename T>
DeviceBuffer to_device(const std::vector<T>& host, const Stream& stream) {
  Expected<DeviceBuffer> buffer = DeviceBuffer::allocate(host.size() * sizeof(T));
  EXPECT_TRUE(buffer.ok()) << buffer.status().to_string();
  if (!buffer.ok()) return DeviceBuffer();
  const Status st = buffer->upload(host.data(), host.size() * sizeof(T), stream);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return std::move(buffer).value();
}

// A GEMM weight on the device: natural bf16 rows w [n][k] relaid (the
// layout gemm_bf16w reads, ADR 0057) through relay_weights_bf16_host.
inline DeviceBuffer to_device_weights(const std::vector<uint16_t>& w, int64_t n, int64_t k,
                                      const Stream& stream) {
  std::vector<uint16_t> relaid(static_cast<size_t>(n * relaid_row_pitch(k)));
  relay_weights_bf16_host(w.data(), n, k, relaid.data());
  return to_device(relaid, stream);
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer& buffer, size_t count, const Stream& stream) {
  std::vector<T> host(count);
  const Status st = buffer.download(host.data(), count * sizeof(T), stream);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return host;
}

// An output buffer poisoned with 0xFF bytes (a NaN pattern in f32), so an
// element the kernel never wrote shows up as NaN.
inline DeviceBuffer poisoned(size_t bytes, const Stream& stream) {
  Expected<DeviceBuffer> buffer = DeviceBuffer::allocate(bytes);
  EXPECT_TRUE(buffer.ok()) << buffer.status().to_string();
  if (!buffer.ok()) return DeviceBuffer();
  const Status st = buffer->fill_bytes(0xFF, stream);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return std::move(buffer).value();
}

inline std::vector<float> random_floats(size_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& f : v) f = dist(rng);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

inline std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i]);
  return out;
}

inline bool same_bits(const float* a, const float* b, size_t count) {
  return std::memcmp(a, b, count * sizeof(float)) == 0;
}

// A kernel context that runs the CPU's scalar reference (the tests' oracle).
inline Ctx scalar_ctx() {
  Ctx ctx;
  ctx.isa = Isa::scalar;
  return ctx;
}

}  // namespace tandem::kernels::gpu::testing
