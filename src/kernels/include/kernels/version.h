// kernels/version.h — one number that names the kernels' behaviour.
//
// kKernelVersion is bumped by hand whenever a kernel changes what it computes
// (the bits of any result: a new reduction order, a new variant) or how fast
// it runs by enough to change a measured decision (a new blocking scheme, a
// new ISA path). Anything persisted from a measurement of the kernels — the
// speculation policy's hint files (docs/adr/0005-policy-confidence.md) — is
// stored with it and thrown away when it differs. No state; header only.
#pragma once

namespace tandem::kernels {

inline constexpr int kKernelVersion = 1;

}  // namespace tandem::kernels
