// gemm_wgmma.h — internal to tandem_kernels_cuda and its tests: the large-M
// GEMM through Hopper wgmma (gemm_wgmma.cu, ADR 0053), and the probe that
// compares wgmma's k16 step with mma.sync's bit for bit.
#pragma once

#include <cstdint>

#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

// True when this build holds the sm_90a kernels and the current device is
// compute capability 9.0 (Hopper); otherwise the functions below refuse.
bool wgmma_available();

// y = x·Wᵀ like gemm_bf16w's large tile, with the same mma chain per output
// (order in gemm_kernel.cuh) executed by wgmma.m64nNk16, block tile 128 x
// rows × 256 (config 0, 2) or 128 (1, 3) weight rows; the configurations
// differ only in pipelining (gemm_wgmma.cu), never in the bits. slice as in
// gemm_kernel.cuh's launch (0: all of k into y; else K slices into
// consecutive [m][n] slabs).
Status gemm_wgmma(CUstream_st* stream, const void* x, bool f32x, int64_t m, const uint16_t* w, int64_t n,
                  int64_t k, float* y, int64_t slice, int config);

// The same product by the warp-specialised kernel (gemm_wgmma_ws.cu, ADR
// 0055): a producer warpgroup and two consumer warpgroups over an
// mbarrier ring, 128 x rows × 256 (config 0-2) or 128 (3) weight rows; the
// same bits as gemm_wgmma.
Status gemm_wgmma_ws(CUstream_st* stream, const void* x, bool f32x, int64_t m, const uint16_t* w, int64_t n,
                     int64_t k, float* y, int64_t slice, int config);

// The same product over relaid weights (relay_weights_bf16, ADR 0057) by the
// TMA kernel (gemm_wgmma_tma.cu): weights and x by TMA with the 128-byte
// swizzle, a producer thread and two consumer warpgroups over an mbarrier
// ring; config 0: 128 x rows × 256 weight rows, 1: the same with one tile's
// wgmmas in flight, 2: 256 × 128. slice: a multiple of 64 (or 0 / k).
Status gemm_wgmma_tma(CUstream_st* stream, const void* x, bool f32x, int64_t m, const uint16_t* w_relaid,
                      int64_t n, int64_t k, float* y, int64_t slice, int config);

// The probe (tests/kernels/cuda/wgmma_probe_test.cpp): `trials` independent
// problems of `steps` k16 steps each. Trial t: x [steps][64][16] bf16 and
// w [steps][256][16] bf16 (slot order: element s of a row is the step's
// k slot s), c [64][256] f32 the starting accumulator. Both outputs
// [trials][64][256]: d = c + Σ_steps x·wᵀ, once by chained mma.sync.m16n8k16
// (w as the 16-row A operand, x as B: the GEMM's roles) into d_mma, once by
// chained wgmma.m64n256k16 (x as A from registers, w as B from shared memory:
// gemm_wgmma's roles) into d_wgmma.
Status wgmma_probe(const Stream& stream, int trials, int steps, const uint16_t* x, const uint16_t* w,
                   const float* c, float* d_mma, float* d_wgmma);

}  // namespace tandem::kernels::gpu
