// reference/table.cpp — the scalar KernelTable.
#include "quant/quantize_blocks.h"
#include "reference/reference.h"

namespace tandem::kernels {

const KernelTable& reference_kernels() {
  static const KernelTable table = {
      reference::matmul_panels,
      reference::matmul_bf16_pairs,
      reference::rmsnorm_row,
      reference::softmax_row,
      reference::swiglu,
      reference::gelu_tanh_gate,
      reference::add_inplace,
      reference::to_f32,
      reference::rope_row,
      reference::attend,
      reference::matmul_quant,
      quant::quantize_activations,
      quant::quantize_q4_k_reference,
      quant::quantize_q4_0_reference,
  };
  return table;
}

}  // namespace tandem::kernels
