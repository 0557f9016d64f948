// avx2/matmul_quant.cpp — the quantized matmul for this ISA. Until its
// vector kernel lands it runs the scalar reference, which defines the bits
// every variant must produce (ADR 0013), so results are already identical.
#include "avx2/avx2.h"
#include "reference/reference.h"

namespace tandem::kernels::avx2 {

void matmul_quant(const quant::QuantMatmulArgs& args) { reference::matmul_quant(args); }

}  // namespace tandem::kernels::avx2
