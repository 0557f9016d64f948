// The gate's decision logic with scripted probe results (no model): reason
// strings, memoization, the kernel retry and the pin.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/ops.h"
#include "speculative/exactness.h"

namespace tandem::speculative {
namespace {

ProbeResult pass() {
  ProbeResult r;
  r.ran = true;
  r.exact = true;
  return r;
}

ProbeResult differs(int32_t position) {
  ProbeResult r;
  r.ran = true;
  r.position = position;
  r.differing_bytes = 17;
  r.total_bytes = 1024;
  return r;
}

TEST(ProbeResult, ReasonStringsFollowTheSpec) {
  EXPECT_EQ(pass().reason(), "verify block is byte-identical to the single-token chain");
  EXPECT_EQ(differs(2).reason(),
            "verify block position 2 differs from the single-token chain in 17 of 1024 logit bytes");
  ProbeResult no;
  no.why = "out of memory";
  EXPECT_EQ(no.reason(), "exactness probe did not run: out of memory");
}

TEST(ExactnessGate, PassIsMemoizedPerBlockSize) {
  int calls = 0;
  ExactnessGate gate(
      "m",
      [&](int, kernels::GemmMode) {
        ++calls;
        return pass();
      },
      /*allow_inexact=*/false);
  EXPECT_TRUE(gate.allowed(4));
  EXPECT_TRUE(gate.allowed(4));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(gate.decide(4).exact);
  EXPECT_FALSE(gate.decide(4).decline_reason.has_value());
  EXPECT_TRUE(gate.allowed(5));
  EXPECT_EQ(calls, 2);
}

TEST(ExactnessGate, FailureOnInvariantKernelDeclinesWithoutRetry) {
  int calls = 0;
  ExactnessGate gate(
      "m",
      [&](int, kernels::GemmMode) {
        ++calls;
        return differs(1);
      },
      /*allow_inexact=*/false);
  const GateDecision& d = gate.decide(4);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(d.decline_reason.value(),
            "verify block position 1 differs from the single-token chain in 17 of 1024 logit bytes.");
}

TEST(ExactnessGate, RequestedSplitKIsRetriedWithTheInvariantKernel) {
  std::vector<kernels::GemmMode> modes;
  ExactnessGate gate(
      "m",
      [&](int, kernels::GemmMode mode) {
        modes.push_back(mode);
        return mode == kernels::GemmMode::invariant ? pass() : differs(3);
      },
      /*allow_inexact=*/false, GemmRequest{kernels::GemmMode::splitk, /*pinned=*/false});
  EXPECT_EQ(gate.gemm_mode(), kernels::GemmMode::splitk);
  const GateDecision& d = gate.decide(4);
  EXPECT_TRUE(d.allowed);
  EXPECT_TRUE(d.exact);
  ASSERT_EQ(modes.size(), 2u);
  EXPECT_EQ(modes[0], kernels::GemmMode::splitk);
  EXPECT_EQ(modes[1], kernels::GemmMode::invariant);
  EXPECT_EQ(d.gemm, kernels::GemmMode::invariant);
  EXPECT_EQ(gate.gemm_mode(), kernels::GemmMode::invariant);  // the switch sticks
  gate.decide(5);  // a later K probes with the mode the gate settled on
  ASSERT_EQ(modes.size(), 3u);
  EXPECT_EQ(modes[2], kernels::GemmMode::invariant);
  EXPECT_EQ(kernels::Ctx{}.gemm, kernels::GemmMode::invariant);  // nothing process-wide moved
}

TEST(ExactnessGate, RetryThatAlsoFailsRestoresTheRequestedKernel) {
  ExactnessGate gate(
      "m", [&](int, kernels::GemmMode) { return differs(0); }, /*allow_inexact=*/false,
      GemmRequest{kernels::GemmMode::splitk, /*pinned=*/false});
  const GateDecision& d = gate.decide(3);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(gate.probe_runs(), 2);
  EXPECT_EQ(gate.gemm_mode(), kernels::GemmMode::splitk);
  EXPECT_EQ(d.gemm, kernels::GemmMode::splitk);
  EXPECT_EQ(
      d.decline_reason.value(),
      "verify block position 0 differs from the single-token chain in 17 of 1024 logit bytes. Switching to "
      "the invariant kernel did not make it exact either.");
}

TEST(ExactnessGate, APinnedModeIsNeverRetried) {
  std::vector<kernels::GemmMode> modes;
  ExactnessGate gate(
      "m",
      [&](int, kernels::GemmMode mode) {
        modes.push_back(mode);
        return differs(2);
      },
      /*allow_inexact=*/false, GemmRequest{kernels::GemmMode::splitk, /*pinned=*/true});
  const GateDecision& d = gate.decide(4);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(gate.probe_runs(), 1);
  ASSERT_EQ(modes.size(), 1u);
  EXPECT_EQ(modes[0], kernels::GemmMode::splitk);
  EXPECT_EQ(gate.gemm_mode(), kernels::GemmMode::splitk);
  EXPECT_EQ(
      d.decline_reason.value(),
      "verify block position 2 differs from the single-token chain in 17 of 1024 logit bytes. The kernel "
      "retry was skipped because TANDEM_GEMM is pinned.");
}

// Two gates with different requests in one process: each probes with its own mode.
TEST(ExactnessGate, TheRequestedModeIsAParameter) {
  std::vector<kernels::GemmMode> a, b;
  ExactnessGate invariant(
      "m",
      [&](int, kernels::GemmMode mode) {
        a.push_back(mode);
        return pass();
      },
      /*allow_inexact=*/false);
  ExactnessGate splitk(
      "m",
      [&](int, kernels::GemmMode mode) {
        b.push_back(mode);
        return pass();
      },
      /*allow_inexact=*/false, GemmRequest{kernels::GemmMode::splitk, /*pinned=*/false});
  EXPECT_TRUE(splitk.allowed(4));
  EXPECT_TRUE(invariant.allowed(4));
  EXPECT_EQ(a, std::vector<kernels::GemmMode>{kernels::GemmMode::invariant});
  EXPECT_EQ(b, std::vector<kernels::GemmMode>{kernels::GemmMode::splitk});
  EXPECT_EQ(splitk.gemm_mode(), kernels::GemmMode::splitk);  // exact as requested: kept
}

// allow_inexact is the caller's (the app reads TANDEM_MTP_ALLOW_INEXACT), not
// the process environment's: two gates in one process decide differently.
TEST(ExactnessGate, AllowInexactIsAParameter) {
  ExactnessGate strict(
      "m", [&](int, kernels::GemmMode) { return differs(1); }, /*allow_inexact=*/false);
  ExactnessGate lenient(
      "m", [&](int, kernels::GemmMode) { return differs(1); }, /*allow_inexact=*/true);
  const GateDecision& no = strict.decide(4);
  EXPECT_FALSE(no.allowed);
  EXPECT_FALSE(no.exact);
  ASSERT_TRUE(no.decline_reason.has_value());
  const GateDecision& yes = lenient.decide(4);
  EXPECT_TRUE(yes.allowed);
  EXPECT_FALSE(yes.exact);
  EXPECT_FALSE(yes.decline_reason.has_value());
  EXPECT_EQ(yes.probe_reason, no.probe_reason);
  // An exact verify is allowed either way.
  ExactnessGate exact(
      "m", [&](int, kernels::GemmMode) { return pass(); }, /*allow_inexact=*/false);
  EXPECT_TRUE(exact.allowed(4));
}

}  // namespace
}  // namespace tandem::speculative
