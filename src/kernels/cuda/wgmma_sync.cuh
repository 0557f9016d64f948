// wgmma_sync.cuh — the synchronisation pieces the warp-specialised wgmma
// tiles share (gemm_wgmma_ws.cu, ADR 0055; gemm_wgmma_tma.cu, ADR 0057;
// internal to tandem_kernels_cuda): setmaxnreg and the shared::cta mbarriers.
// Real instructions only where nvcc targets sm_90a (wgmma_ops.cuh).
#pragma once

#include <cstdint>

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

// ---- mbarriers (shared::cta) ----------------------------------------------------

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if TANDEM_WGMMA_COMPILED
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  (void)bar, (void)count;
  __trap();
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if TANDEM_WGMMA_COMPILED
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
#endif
}
// Arrives once every cp.async this thread issued so far has landed (counts
// as one of the barrier's expected arrivals).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
#if TANDEM_WGMMA_COMPILED
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if TANDEM_WGMMA_COMPILED
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  (void)bar, (void)parity;
#endif
}

}  // namespace
}  // namespace tandem::kernels::gpu
