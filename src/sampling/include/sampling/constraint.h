// TokenConstraint: which tokens may come next, as a function of the tokens a
// request has generated so far (structured outputs: a grammar's token mask).
//
// The sampler applies it first in the logits-processor chain (processors.h),
// on every path that picks a token — classic steps, speculative verify rows
// and the drafters' proposals — so it must depend on `generated` (the prefix
// before the position) and nothing else: the same prefix gives the same mask
// whichever path asks. Masked tokens become -infinity.
//
// Implementations may cache (the grammar engine keeps the states along the
// last prefix it saw) and are therefore not thread-safe: one request's
// constraint is used by one thread at a time, which the engine guarantees
// because a request's rows are sampled by one thread.
#pragma once

#include <cstdint>
#include <span>

namespace tandem::sampling {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets logits[i] = -infinity for every token i that may not follow `generated`.
  virtual void mask(std::span<float> logits, std::span<const int32_t> generated) = 0;
};

}  // namespace tandem::sampling
