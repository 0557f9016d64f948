// wgmma_sync.cuh — the synchronisation pieces the warp-specialised wgmma
// tiles share (gemm_wgmma_ws.cu, ADR 0055; gemm_wgmma_tma.cu, ADR 0057;
// internal to tandem_kernels_cuda): setmaxnreg (real instructions only where
// nvcc targets sm_90a, wgmma_ops.cuh) and the shared::cta mbarriers
// (mbarrier.cuh).
#pragma once

#include <cstdint>

#include "cuda/mbarrier.cuh"
#include "cuda/wgmma_ops.cuh"

namespace tandem::kernels::gpu {
namespace {

template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if TANDEM_WGMMA_COMPILED
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if TANDEM_WGMMA_COMPILED
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

}  // namespace
}  // namespace tandem::kernels::gpu
