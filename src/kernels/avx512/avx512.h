// avx512/avx512.h — the AVX-512 (F, BW, VL + FMA, F16C) kernels. Defined in
// translation units compiled with those target flags; call only through
// kernels_for(Isa::avx512) on a CPU that supports them.
#pragma once

#include "kernel_table.h"

namespace tandem::kernels::avx512 {

void matmul_panels(const MatmulArgs& args);
void matmul_bf16_pairs(const MatmulArgs& args);  // vdpbf16ps where the CPU has it (avx512/matmul_bf16.cpp)
// Without AVX512_BF16: each vdpbf16ps as two FMAs under MXCSR DAZ | FTZ (the
// same bits); exposed so tests can run it on a CPU that has the instruction.
void matmul_bf16_pairs_emulated(const MatmulArgs& args);
void rmsnorm_row(const float* x, const float* weight, float* y, int64_t dim, float eps);
void softmax_row(float* x, int64_t n);
void swiglu(const float* gate, const float* up, float* out, int64_t count);
void gelu_tanh_gate(const float* gate, const float* up, float* out, int64_t count);
void add_inplace(float* y, const float* x, int64_t count);
void to_f32(const void* src, DType dtype, int64_t count, float* dst);
void rope_row(float* x, int n_heads, int head_dim, const float* cos, const float* sin, int rotary_dim,
              RopeLayout layout);
void attend(const AttendArgs& args);
void matmul_quant(const quant::QuantMatmulArgs& args);  // VNNI when the CPU has it
// The AVX-512 BW path without VNNI (what matmul_quant runs on such CPUs);
// exposed so tests can run it on a CPU that has VNNI.
void matmul_quant_no_vnni(const quant::QuantMatmulArgs& args);

// The q4_k fit in 16 lanes (quant/q4_k_fit.h): 4 super-blocks per fit.
void quantize_q4_k(const float* x, int64_t blocks, uint8_t* out);

}  // namespace tandem::kernels::avx512
