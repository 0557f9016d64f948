#include "core/cpu_features.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tandem {
namespace {

#if defined(__x86_64__)
uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

std::string brand_string() {
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000004u) return "unknown-x86";
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    __get_cpuid(0x80000002u + i, &a, &b, &c, &d);
    std::memcpy(brand + 16 * i + 0, &a, 4);
    std::memcpy(brand + 16 * i + 4, &b, 4);
    std::memcpy(brand + 16 * i + 8, &c, 4);
    std::memcpy(brand + 16 * i + 12, &d, 4);
  }
  std::string s(brand);
  const auto first = s.find_first_not_of(' ');
  const auto last = s.find_last_not_of(' ');
  return first == std::string::npos ? "unknown-x86" : s.substr(first, last - first + 1);
}

CpuVendor vendor() {
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return CpuVendor::other;
  char id[13] = {};
  std::memcpy(id + 0, &b, 4);
  std::memcpy(id + 4, &d, 4);
  std::memcpy(id + 8, &c, 4);
  if (std::strcmp(id, "GenuineIntel") == 0) return CpuVendor::intel;
  if (std::strcmp(id, "AuthenticAMD") == 0) return CpuVendor::amd;
  return CpuVendor::other;
}

CpuFeatures detect() {
  CpuFeatures f;
  f.model_name = brand_string();
  f.vendor = vendor();
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  f.fma = ((c >> 12) & 1) && ymm_os;
  f.f16c = ((c >> 29) & 1) && ymm_os;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = ((b >> 5) & 1) && ymm_os;
    f.avx512f = ((b >> 16) & 1) && zmm_os;
    f.avx512bw = ((b >> 30) & 1) && zmm_os;
    f.avx512vl = ((b >> 31) & 1) && zmm_os;
    f.avx512vnni = ((c >> 11) & 1) && zmm_os;
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = ((a >> 5) & 1) && zmm_os;
    f.avx_vnni = ((a >> 4) & 1) && ymm_os;
  }
  return f;
}
#else
CpuFeatures detect() {
  CpuFeatures f;
  f.model_name = "unknown-non-x86";
  return f;
}
#endif

}  // namespace

const char* cpu_vendor_name(CpuVendor vendor) {
  switch (vendor) {
    case CpuVendor::intel:
      return "intel";
    case CpuVendor::amd:
      return "amd";
    default:
      return "other";
  }
}

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512bf16, "avx512bf16");
  add(avx512vnni, "avx512vnni");
  add(avx_vnni, "avx_vnni");
  return s.empty() ? "none" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace tandem
