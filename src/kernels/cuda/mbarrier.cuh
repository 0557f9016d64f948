// mbarrier.cuh — shared::cta mbarriers and the bulk (TMA) copies that complete
// on them (sm_90; internal to tandem_kernels_cuda): the warp-specialised wgmma
// tiles (ADRs 0055, 0057) and the streamed quantized GEMM (ADR 0078). Real
// instructions only where nvcc targets sm_90 or later; elsewhere mbar_init
// traps and the host side never launches a kernel that uses them.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TANDEM_SM90_COMPILED 1
#else
#define TANDEM_SM90_COMPILED 0
#endif

namespace tandem::kernels::gpu {
namespace {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if TANDEM_SM90_COMPILED
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  (void)bar, (void)count;
  __trap();
#endif
}
// Makes the initialised barriers visible to the async proxy (then __syncthreads()).
__device__ __forceinline__ void mbar_init_fence() {
#if TANDEM_SM90_COMPILED
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if TANDEM_SM90_COMPILED
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
#endif
}
// Arrives once every cp.async this thread issued so far has landed (counts
// as one of the barrier's expected arrivals).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
#if TANDEM_SM90_COMPILED
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
#endif
}
// Arrives and expects `bytes` more of asynchronous copies to complete on it.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
#if TANDEM_SM90_COMPILED
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#else
  (void)bar, (void)bytes;
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if TANDEM_SM90_COMPILED
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

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from
// global memory to shared memory at `dst`, completing on `bar` (whose
// expect_tx must count them). Copies move bytes; they never change a value.
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
#if TANDEM_SM90_COMPILED
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#else
  (void)dst, (void)src, (void)bytes, (void)bar;
#endif
}

// Orders this thread's generic-proxy accesses of shared memory against the
// async proxy's (wgmma operands it wrote; a slot every thread read, then
// refilled by a bulk copy).
__device__ __forceinline__ void fence_proxy_async() {
#if TANDEM_SM90_COMPILED
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace
}  // namespace tandem::kernels::gpu
