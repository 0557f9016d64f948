// avx2/table.cpp — the AVX2 KernelTable.
#include "avx2/avx2.h"
#include "reference/reference.h"

namespace tandem::kernels {

const KernelTable& avx2_kernels() {
  static const KernelTable table = {
      avx2::matmul_panels, reference::matmul_bf16_pairs,
      avx2::rmsnorm_row,   avx2::softmax_row,
      avx2::swiglu,        avx2::gelu_tanh_gate,
      avx2::add_inplace,   avx2::to_f32,
      avx2::rope_row,      avx2::attend,
      avx2::matmul_quant,  avx2::quantize_activations,
      avx2::quantize_q4_k, avx2::quantize_q4_0,
  };
  return table;
}

}  // namespace tandem::kernels
