// l2_prefetch.cuh — extra blocks of a latency-bound kernel that pull the next
// GEMM's weights into the L2 cache (ADR 0063; internal to tandem_kernels_cuda).
//
// A decode step's glue kernels (qkv + RoPE, residual + norm, SwiGLU) run on a
// few SMs for 3–8 µs while HBM idles; the GEMM after them then streams its
// weights from HBM. A launch given an L2Prefetch gets `l2_prefetch_blocks`
// more blocks along x; each of those calls l2_prefetch_block first, which
// issues its share of the bulk L2 prefetches after the grid dependency wait
// (the GEMM before has finished streaming, so nothing it reads evicts them)
// and returns true: the block then exits. The first kL2PrefetchSkip bytes of
// each slice are left out: the next GEMM's blocks, resident early under PDL,
// request those themselves before their wait. A prefetch moves no value, so no
// result can change (the bitwise tests run with it on and off).
#pragma once

#include <cuda_runtime.h>

#include "cuda/launch.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

// Blocks added along x for a prefetch (none when it is empty).
inline unsigned l2_prefetch_blocks(const L2Prefetch& pf, unsigned per_row_blocks) {
  if (pf.base == nullptr || pf.take <= 0) return 0;
  return per_row_blocks >= 16 ? 1 : (16 + per_row_blocks - 1) / per_row_blocks;
}

__device__ __forceinline__ void l2_prefetch_bytes(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p, (void)bytes;
#endif
}

// True for a prefetch block (blockIdx.x >= real_x): it has issued its share of
// `pf` (pieces spread over every thread of the extra blocks) and must return.
// Keeps launch.cuh's contract: dependents released first, the wait before exit.
__device__ __forceinline__ bool l2_prefetch_block(const L2Prefetch& pf, unsigned real_x) {
  if (blockIdx.x < real_x) return false;
  pdl_launch_dependents();
  pdl_wait();
  const int64_t threads = static_cast<int64_t>(gridDim.x - real_x) * gridDim.y * blockDim.x;
  const int64_t me =
      (static_cast<int64_t>(blockIdx.x - real_x) * gridDim.y + blockIdx.y) * blockDim.x + threadIdx.x;
  const unsigned char* base = static_cast<const unsigned char*>(pf.base);
  const int64_t pieces = pf.rows * pf.slices;
  for (int64_t i = me; i < pieces; i += threads) {
    const int64_t r = i / pf.slices, z = i % pf.slices;
    const int64_t start = z * pf.slice_bytes + pf.skip;  // within row r
    const int64_t end = min(min(start + pf.take, (z + 1) * pf.slice_bytes), pf.pitch);
    if (end > start) l2_prefetch_bytes(base + r * pf.pitch + start, static_cast<uint32_t>(end - start));
  }
  return true;
}

}  // namespace tandem::kernels::gpu
