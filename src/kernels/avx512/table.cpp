// avx512/table.cpp — the AVX-512 (F, BW, VL) KernelTable.
#include "reference/reference.h"

namespace tandem::kernels {

const KernelTable& avx512_kernels() { return reference_kernels(); }

}  // namespace tandem::kernels
