#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/ops.h"

namespace tandem::kernels {
namespace {

TEST(Dispatch, EnvCanOnlyLowerTheIsa) {
  EXPECT_EQ(isa_limit_from_env(nullptr, Isa::avx512), Isa::avx512);
  EXPECT_EQ(isa_limit_from_env("", Isa::avx512), Isa::avx512);
  EXPECT_EQ(isa_limit_from_env("avx2", Isa::avx512), Isa::avx2);
  EXPECT_EQ(isa_limit_from_env(" AVX2\n", Isa::avx512), Isa::avx2);
  EXPECT_EQ(isa_limit_from_env("scalar", Isa::avx512), Isa::scalar);
  EXPECT_EQ(isa_limit_from_env("scalar", Isa::avx2), Isa::scalar);
  EXPECT_EQ(isa_limit_from_env("avx512", Isa::avx2), Isa::avx2);  // never raised
  EXPECT_EQ(isa_limit_from_env("avx512", Isa::scalar), Isa::scalar);
  EXPECT_EQ(isa_limit_from_env("avx512", Isa::avx512), Isa::avx512);
  EXPECT_EQ(isa_limit_from_env("sse9", Isa::avx2), Isa::avx2);  // unrecognised: ignored
}

// Test hook: what the app does at start-up with TANDEM_KERNELS (the kernels
// read no environment), so `TANDEM_KERNELS=scalar test_kernels` tests that ISA.
const bool kIsaSelected = [] {
  if (const char* v = std::getenv("TANDEM_KERNELS")) select_isa(isa_limit_from_env(v, best_supported_isa()));
  return true;
}();

TEST(Dispatch, ActiveIsaIsSupportedAndRespectsEnv) {
  EXPECT_TRUE(kIsaSelected);
  const Isa active = active_isa();
  EXPECT_TRUE(isa_supported(active));
  EXPECT_TRUE(isa_supported(Isa::scalar));
  EXPECT_EQ(active, isa_limit_from_env(std::getenv("TANDEM_KERNELS"), best_supported_isa()));
  EXPECT_STREQ(isa_name(Isa::avx512), "avx512");
}

TEST(Dispatch, GemmModeParsingAndRequest) {
  GemmMode mode = GemmMode::invariant;
  EXPECT_TRUE(parse_gemm_mode(" SplitK ", &mode));
  EXPECT_EQ(mode, GemmMode::splitk);
  EXPECT_TRUE(parse_gemm_mode("invariant", &mode));
  EXPECT_EQ(mode, GemmMode::invariant);
  EXPECT_FALSE(parse_gemm_mode("auto", &mode));
  EXPECT_FALSE(parse_gemm_mode(nullptr, &mode));
  EXPECT_STREQ(gemm_mode_name(GemmMode::splitk), "splitk");

  // No process-wide mode: a Ctx starts invariant and carries its own.
  Ctx splitk;
  splitk.gemm = GemmMode::splitk;
  EXPECT_EQ(splitk.gemm, GemmMode::splitk);
  EXPECT_EQ(Ctx{}.gemm, GemmMode::invariant);
  splitk.gemm = GemmMode::invariant;
  EXPECT_EQ(splitk.gemm, GemmMode::invariant);
}

TEST(Dispatch, DtypeHelpers) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_STREQ(dtype_name(DType::bf16), "bf16");
}

}  // namespace
}  // namespace tandem::kernels
