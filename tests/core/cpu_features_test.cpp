#include "core/cpu_features.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tandem
