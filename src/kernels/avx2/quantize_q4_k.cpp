// avx2/quantize_q4_k.cpp — llama.cpp's q4_k quantizer, the fit in 8 lanes
// (quant/q4_k_fit.h: the same bytes as the reference table's 4-lane fit).
#include "avx2/avx2.h"
#include "quant/q4_k_fit.h"

namespace tandem::kernels::avx2 {

void quantize_q4_k(const float* x, int64_t blocks, uint8_t* out) {
  quant::quantize_q4_k_blocks<8>(x, blocks, out);
}

}  // namespace tandem::kernels::avx2
