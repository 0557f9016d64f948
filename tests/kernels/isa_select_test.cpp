// Start-up configuration in a binary of its own (select_isa lasts for the
// process): the kernels read no environment. The app passes TANDEM_KERNELS's
// limit to select_isa() once; TANDEM_GEMM is resolved by the app into a value
// each Ctx / model::Forward carries, so nothing process-wide holds a gemm mode.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/ops.h"

namespace tandem::kernels {
namespace {

TEST(KernelConfig, TheEnvironmentIsNotReadAndSelectIsaOnlyLowers) {
  ::setenv("TANDEM_GEMM", "splitk", 1);     // the kernels do not read it
  ::setenv("TANDEM_KERNELS", "scalar", 1);  // nor this
  EXPECT_EQ(active_isa(), best_supported_isa());
  EXPECT_EQ(Ctx{}.isa, best_supported_isa());
  EXPECT_EQ(Ctx{}.gemm, GemmMode::invariant);

  // A Ctx's mode is its own: setting one leaves a fresh one at the default.
  Ctx fast;
  fast.gemm = GemmMode::splitk;
  EXPECT_EQ(fast.gemm, GemmMode::splitk);
  EXPECT_EQ(Ctx{}.gemm, GemmMode::invariant);

  select_isa(Isa::scalar);
  EXPECT_EQ(active_isa(), Isa::scalar);
  EXPECT_EQ(Ctx{}.isa, Isa::scalar);
  select_isa(Isa::avx512);  // above the CPU's best: the best
  EXPECT_EQ(active_isa(), best_supported_isa());
  EXPECT_TRUE(isa_supported(active_isa()));
}

}  // namespace
}  // namespace tandem::kernels
