// pack.cpp — PackedMatrix::pack: row-major [n][k] -> k-major panels of kPanel
// columns (layout in kernel_table.h). Precision is kept; only the order changes.
// Quantized dtypes go to quant/pack.cpp (layout in quant/layout.h).
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "core/check.h"
#include "kernel_table.h"
#include "kernels/unpack.h"
#include "load_split.h"
#include "quant/layout.h"

namespace tandem::kernels {
namespace quant {
void pack_quantized(const uint8_t* src, DType dtype, int64_t n, int64_t k, uint8_t* dst);
}  // namespace quant
namespace {
// Transposes one panel: `cols` source rows of k elements -> [k][kPanel].
// Blocked over k: for a block of kBlock k values, each source row gives one
// contiguous run and the block's panel rows (8 KiB of bf16) stay in L1, so
// source and panel are each streamed once (5x faster than k outer, j inner
// on an 8B model's 14336-wide rows, whose 64 read streams miss every time).
// `src` may be any address (safetensors data need not be aligned to the
// element size), so it is read with memcpy; the compiler emits plain loads.
template <typename T>
void pack_panel(const uint8_t* src, int64_t k, int64_t cols, const int64_t* slot, T* panel) {
  constexpr int64_t kBlock = 64;
  for (int64_t k0 = 0; k0 < k; k0 += kBlock) {
    const int64_t k1 = std::min(k, k0 + kBlock);
    for (int64_t j = 0; j < cols; ++j) {
      const uint8_t* row = src + j * k * sizeof(T);
      T* out = panel + slot[j];
      for (int64_t kk = k0; kk < k1; ++kk) std::memcpy(&out[kk * kPanel], row + kk * sizeof(T), sizeof(T));
    }
  }
}
}  // namespace

PackedMatrix PackedMatrix::pack(const void* data, DType dtype, int64_t n, int64_t k) {
  TANDEM_CHECK(n > 0 && k > 0);
  PackedMatrix out;
  out.n_ = n;
  out.k_ = k;
  out.dtype_ = dtype;
  if (dtype_is_quantized(dtype)) {
    TANDEM_CHECK(check_matrix_shape(dtype, n, k).ok());
    const quant::Layout layout = quant::layout_of(dtype);
    const size_t group_bytes = static_cast<size_t>(layout.group_bytes(k));
    out.data_.allocate(static_cast<size_t>(quant::group_count(n)) * group_bytes);  // zeroed padding
    quant::pack_quantized(static_cast<const uint8_t*>(data), dtype, n, k, out.data_.data());
    out.weight_bytes_ = static_cast<size_t>(n) * (group_bytes / quant::kGroup);
    return out;
  }
  out.weight_bytes_ = static_cast<size_t>(n) * k * dtype_size(dtype);
  const size_t esize = dtype_size(dtype);
  const int64_t panels = panel_count(n);
  int64_t slot[kPanel];
  for (int64_t j = 0; j < kPanel; ++j) slot[j] = packed_slot(dtype, j);
  out.data_.allocate(static_cast<size_t>(panels) * kPanel * k * esize);  // zeroed: padding columns are 0
  const auto* src = static_cast<const uint8_t*>(data);
  uint8_t* dst = out.data_.data();
  auto pack_panels = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t cols = std::min<int64_t>(kPanel, n - p * kPanel);
      uint8_t* panel = dst + static_cast<size_t>(p) * k * kPanel * esize;
      const uint8_t* rows = src + static_cast<size_t>(p) * kPanel * k * esize;
      if (esize == 4) {
        pack_panel(rows, k, cols, slot, reinterpret_cast<uint32_t*>(panel));
      } else {
        pack_panel(rows, k, cols, slot, reinterpret_cast<uint16_t*>(panel));
      }
    }
  };
  // Each panel is written by one thread, so the bytes do not depend on the split.
  split_for_load(panels, static_cast<size_t>(n) * k * esize, pack_panels);
  return out;
}

void split_for_load(int64_t count, size_t bytes, const std::function<void(int64_t, int64_t)>& fn) {
  const int threads =
      bytes < (size_t{16} << 20)
          ? 1
          : static_cast<int>(std::min<unsigned>(8, std::max(1u, std::thread::hardware_concurrency())));
  if (threads == 1 || count < 2) {
    fn(0, count);
    return;
  }
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(fn, count * t / threads, count * (t + 1) / threads);
  fn(0, count / threads);
  for (std::thread& w : workers) w.join();
}

PackedMatrix PackedMatrix::stack(std::vector<PackedMatrix> parts) {
  TANDEM_CHECK(!parts.empty());
  PackedMatrix out;
  out.k_ = parts[0].k_;
  out.dtype_ = parts[0].dtype_;
  for (const PackedMatrix& p : parts) {
    TANDEM_CHECK(p.k_ == out.k_ && dtype_is_quantized(p.dtype_) && p.parts_.empty());
    out.n_ += p.n_;
    out.weight_bytes_ += p.weight_bytes_;
  }
  out.parts_ = std::move(parts);
  return out;
}

namespace {
// Rows [j0, j1) of one panel back to row-major [j1 - j0][k]. Blocked over k:
// a block's kBlock panel rows (8 KiB of bf16) stay in L1 while every output
// row takes its kBlock elements, so each panel line is read from memory once
// (a row at a time would read a cache line per element).
template <typename T>
void unpack_panel(const T* panel, int64_t k, int64_t j0, int64_t j1, const int64_t* slot, T* out) {
  constexpr int64_t kBlock = 64;
  for (int64_t k0 = 0; k0 < k; k0 += kBlock) {
    const int64_t k1 = std::min(k, k0 + kBlock);
    for (int64_t j = j0; j < j1; ++j) {
      T* row = out + (j - j0) * k;
      const T* src = panel + slot[j];
      for (int64_t kk = k0; kk < k1; ++kk) row[kk] = src[kk * kPanel];
    }
  }
}
}  // namespace

void PackedMatrix::unpack(void* dst) const { unpack_rows(*this, 0, n_, dst); }

void PackedMatrix::release_data() {
  data_ = AlignedBuffer<uint8_t>();
  for (PackedMatrix& p : parts_) p.release_data();
  released_ = true;
}

void unpack_rows(const PackedMatrix& w, int64_t row_begin, int64_t rows, void* dst) {
  const DType dtype = w.dtype();
  const int64_t n = w.n(), k = w.k();
  TANDEM_CHECK(!dtype_is_quantized(dtype) && w.parts().empty() && !w.released());
  TANDEM_CHECK(row_begin >= 0 && rows >= 0 && row_begin + rows <= n);
  const size_t esize = dtype_size(dtype);
  int64_t slot[kPanel];
  for (int64_t j = 0; j < kPanel; ++j) slot[j] = packed_slot(dtype, j);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t col = row_begin; col < row_begin + rows;) {
    const int64_t p = col / kPanel, j0 = col % kPanel;
    const int64_t j1 = std::min<int64_t>(kPanel, row_begin + rows - p * kPanel);
    const uint8_t* panel = w.data() + static_cast<size_t>(p) * k * kPanel * esize;
    uint8_t* first = out + static_cast<size_t>(col - row_begin) * k * esize;
    if (esize == 4) {
      unpack_panel(reinterpret_cast<const uint32_t*>(panel), k, j0, j1, slot,
                   reinterpret_cast<uint32_t*>(first));
    } else {
      unpack_panel(reinterpret_cast<const uint16_t*>(panel), k, j0, j1, slot,
                   reinterpret_cast<uint16_t*>(first));
    }
    col = p * kPanel + j1;
  }
}

}  // namespace tandem::kernels
