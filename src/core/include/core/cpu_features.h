// CPU feature detection (cpuid + OS support via xgetbv). Computed once,
// thread-safe to read from anywhere.
#pragma once

#include <string>

namespace tandem {

// cpuid leaf 0's vendor string: "GenuineIntel", "AuthenticAMD", else other.
// Not a capability: kernels choose the same instructions (and bits) on every
// vendor; only tuning (software prefetch, ADR 0049) looks at it.
enum class CpuVendor : unsigned char { other = 0, intel = 1, amd = 2 };
const char* cpu_vendor_name(CpuVendor vendor);  // "intel", "amd", "other"

struct CpuFeatures {
  CpuVendor vendor = CpuVendor::other;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512bf16 = false;
  bool avx512vnni = false;  // vpdpbusd on zmm (the quantized matmul's dot product)
  bool avx_vnni = false;    // vpdpbusd on ymm (VEX)
  std::string model_name;   // e.g. "Intel(R) Xeon(R) Processor"; "unknown-x86" if absent

  // AVX2 + FMA + F16C, with the OS saving YMM state.
  bool has_avx2_level() const { return avx2 && fma && f16c; }
  // AVX-512 F/BW/VL on top of the AVX2 level, with the OS saving ZMM state.
  bool has_avx512_level() const { return has_avx2_level() && avx512f && avx512bw && avx512vl; }
  // "avx2 fma f16c avx512f ..." for logs.
  std::string describe() const;
};

const CpuFeatures& cpu_features();

}  // namespace tandem
