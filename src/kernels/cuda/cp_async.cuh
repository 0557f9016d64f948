// cp_async.cuh — the sm_80+ asynchronous global → shared copies (cp.async)
// the GEMM tiles and the attention's staging queue (internal to
// tandem_kernels_cuda). Copies move bytes; they never change a value.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::gpu {

// Queues a 16-byte copy gmem → smem (a shared-space address); `valid` false
// zero-fills the 16 bytes and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;  // 0: zero-fill, nothing is read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace tandem::kernels::gpu
