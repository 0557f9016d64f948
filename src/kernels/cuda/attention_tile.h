// attention_tile.h — the tile shape of the device attention (internal to
// tandem_kernels_cuda; attention_tile.cu, ADR 0043). attention() in
// attention.cu picks it for calls of many rows; the bits are those of the
// serial and split shapes.
#pragma once

#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

// Whether the tile shape serves this geometry: head_dim 64, 128 or 256 and a
// GQA group of at most the tile's query slots (64 at head_dim 128, else 32).
bool attention_tile_fits(int n_heads, const DeviceKvPool& pool);

// attention() in the tile shape (arguments as attention(); no workspace).
Status attention_tile(const Stream& stream, const float* q, int64_t rows, int n_heads,
                      const DeviceKvPool& pool, const int32_t* positions, const int32_t* block_tables,
                      int64_t table_stride, float scale, int window, float* out);

}  // namespace tandem::kernels::gpu
