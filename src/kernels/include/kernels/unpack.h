// kernels/unpack.h — a packed matrix's rows back in row-major order, a range
// at a time (the CUDA backend unpacks and uploads a large matrix in pieces
// through pinned staging chunks, ADR 0048).
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace tandem::kernels {

// Writes rows [row_begin, row_begin + rows) of `w` row-major: rows * k *
// dtype_size bytes at dst, the same bytes PackedMatrix::unpack writes there.
// Float dtypes, unstacked, and a range inside [0, n) only (CHECKed).
// Thread-safe for distinct dst ranges (it only reads `w`).
void unpack_rows(const PackedMatrix& w, int64_t row_begin, int64_t rows, void* dst);

}  // namespace tandem::kernels
