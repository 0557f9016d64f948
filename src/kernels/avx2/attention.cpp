// avx2/attention.cpp — AVX2 instantiation of simd/attention_impl.h.
#include "avx2/avx2.h"
#include "simd/attention_impl.h"
#include "simd/vec256.h"

namespace tandem::kernels::avx2 {

void attend(const AttendArgs& args) { AttentionKernel<Vec256>::attend(args); }

}  // namespace tandem::kernels::avx2
