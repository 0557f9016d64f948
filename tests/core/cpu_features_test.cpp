#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem {
namespace {

TEST(CpuFeatures, LevelsAreConsistent) {
  const CpuFeatures& f = cpu_features();
  EXPECT_FALSE(f.model_name.empty());
  if (f.has_avx512_level()) {
    EXPECT_TRUE(f.has_avx2_level());
  }
  if (f.avx512bf16) {
    EXPECT_TRUE(f.avx512f);
  }
  EXPECT_FALSE(f.describe().empty());
}

TEST(CpuFeatures, VendorMatchesTheBrandString) {
  const CpuFeatures& f = cpu_features();
  // Brand strings name their maker ("AMD EPYC ...", "Intel(R) Xeon(R) ...");
  // a VM may hide the brand but not the vendor, so only check one way.
  if (f.model_name.find("AMD") != std::string::npos) EXPECT_EQ(f.vendor, CpuVendor::amd);
  if (f.model_name.find("Intel") != std::string::npos) EXPECT_EQ(f.vendor, CpuVendor::intel);
  EXPECT_STREQ(cpu_vendor_name(CpuVendor::amd), "amd");
  EXPECT_STREQ(cpu_vendor_name(CpuVendor::intel), "intel");
  EXPECT_STREQ(cpu_vendor_name(CpuVendor::other), "other");
}

}  // namespace
}  // namespace tandem
