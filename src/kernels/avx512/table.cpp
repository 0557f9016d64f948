// avx512/table.cpp — the AVX-512 KernelTable.
#include "avx2/avx2.h"
#include "avx512/avx512.h"

namespace tandem::kernels {

const KernelTable& avx512_kernels() {
  static const KernelTable table = {
      avx512::matmul_panels, avx512::matmul_bf16_pairs,
      avx512::rmsnorm_row,   avx512::softmax_row,
      avx512::swiglu,        avx512::gelu_tanh_gate,
      avx512::add_inplace,   avx512::to_f32,
      avx512::rope_row,      avx512::attend,
      avx512::matmul_quant,  avx2::quantize_activations,
      avx512::quantize_q4_k, avx2::quantize_q4_0,
  };
  return table;
}

}  // namespace tandem::kernels
