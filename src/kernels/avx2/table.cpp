// avx2/table.cpp — the AVX2 (+FMA, F16C) KernelTable.
#include "reference/reference.h"

namespace tandem::kernels {

const KernelTable& avx2_kernels() { return reference_kernels(); }

}  // namespace tandem::kernels
