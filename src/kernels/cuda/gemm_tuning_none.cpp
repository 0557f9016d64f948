// gemm_tuning_none.cpp — the default build has no tuning candidates
// (-DTANDEM_CUDA_TUNING=ON compiles gemm_tuning.cu instead).
#include "cuda/gemm_tuning.h"

namespace tandem::kernels::gpu {

int gemm_tuning_variants() { return 0; }

const char* gemm_tuning_variant_name(GemmTile, int) { return "?"; }

Status gemm_bf16w_variant(GemmTile, int, const Stream&, const void*, DType, int64_t, const uint16_t*, int64_t,
                          int64_t, float*) {
  return unimplemented("gemm_bf16w_variant: build with -DTANDEM_CUDA_TUNING=ON");
}

}  // namespace tandem::kernels::gpu
