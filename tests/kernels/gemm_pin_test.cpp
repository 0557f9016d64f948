// The gemm-mode pin in a binary of its own (a pin lasts for the process): the
// app pins TANDEM_GEMM's value with pin_gemm_mode; the kernels read no
// environment, and a later request (set_gemm_mode: --gemm, the exactness
// gate's retry) does not move a pinned mode.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/ops.h"

namespace tandem::kernels {
namespace {

TEST(GemmPin, APinWinsOverEveryLaterRequest) {
  // Not pinned by anything (not even TANDEM_GEMM in the environment): requests move the mode.
  ::setenv("TANDEM_GEMM", "splitk", 1);  // the kernels do not read it
  EXPECT_FALSE(gemm_mode_pinned());
  EXPECT_EQ(gemm_mode(), GemmMode::invariant);
  set_gemm_mode(GemmMode::splitk);
  EXPECT_EQ(gemm_mode(), GemmMode::splitk);
  EXPECT_EQ(Ctx{}.gemm, GemmMode::splitk);
  set_gemm_mode(GemmMode::invariant);
  EXPECT_EQ(gemm_mode(), GemmMode::invariant);

  pin_gemm_mode(GemmMode::splitk);
  EXPECT_TRUE(gemm_mode_pinned());
  EXPECT_EQ(gemm_mode(), GemmMode::splitk);
  set_gemm_mode(GemmMode::invariant);
  EXPECT_EQ(gemm_mode(), GemmMode::splitk);
  EXPECT_EQ(Ctx{}.gemm, GemmMode::splitk);
}

}  // namespace
}  // namespace tandem::kernels
