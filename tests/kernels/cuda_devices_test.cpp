// The CUDA device query: compiled in exactly when the build says so, and on a
// machine without a GPU it reports that plainly instead of failing.
#include "kernels/cuda_devices.h"

#include <gtest/gtest.h>

namespace tandem::kernels {
namespace {

TEST(CudaDevices, CompiledInMatchesTheBuild) {
  const CudaReport r = query_cuda_devices();
  EXPECT_EQ(r.compiled_in, TANDEM_EXPECT_CUDA != 0);
  EXPECT_FALSE(r.status.empty());
  if (!r.compiled_in) {
    EXPECT_EQ(r.status, "not compiled in");
    EXPECT_TRUE(r.devices.empty());
  } else {
    EXPECT_GE(r.runtime_version, 12000);
  }
}

TEST(CudaDevices, DevicesAreDescribedOrTheirAbsenceIs) {
  const CudaReport r = query_cuda_devices();
  if (!r.compiled_in) GTEST_SKIP() << "CUDA not compiled in";
  if (r.devices.empty()) {
    EXPECT_NE(r.status, "ok");
    GTEST_SKIP() << "skipped: " << r.status;
  }
  EXPECT_EQ(r.status, "ok");
  for (std::size_t i = 0; i < r.devices.size(); ++i) {
    const CudaDevice& d = r.devices[i];
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.sm_major, 5);
    EXPECT_GT(d.total_memory_bytes, 0u);
    EXPECT_GT(d.multiprocessors, 0);
  }
}

TEST(CudaDevices, VersionString) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12080), "12.8");
  EXPECT_EQ(cuda_version_string(0), "none");
}

}  // namespace
}  // namespace tandem::kernels
