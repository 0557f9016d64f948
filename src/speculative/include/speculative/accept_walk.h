// The accept walk of one speculative round.
//
// The verify forward ran the target over [bonus, d0, ..., d(K-2)] at
// positions [L, L+K). Row j's logits choose the token at position L+j+1; the
// target's own pick there (the same seeded sampler classic decode uses) is
// target_pick(j). Drafts are kept while they equal the target's pick; at the
// first mismatch the target's pick is emitted instead and the walk stops; if
// every draft is kept, the last row's pick is emitted as well. So a round
// emits accepted + 1 tokens, exactly the tokens classic decode would have
// produced at those positions. A row with no allowed token (target_pick
// returns sampling::kNoToken) ends the walk without emitting anything for it:
// the tokens before it stand, and `dead_end` says the next position has no
// token — where classic decoding would stop with the same error. Pure
// function; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace tandem::speculative {

struct AcceptResult {
  int32_t accepted = 0;          // drafts kept (0..K-1)
  std::vector<int32_t> emitted;  // accepted drafts, then the target's token (accepted + 1 tokens)
  bool dead_end = false;         // the row after `emitted` allows no token (emitted has `accepted`)
};

// target_pick(j) is called for j = 0, 1, ... in order and only as far as the
// walk needs, so a caller can sample row j lazily (the history for row j
// includes the drafts before it, which equal the emitted tokens when reached).
AcceptResult accept_walk(std::span<const int32_t> drafts,
                         const std::function<int32_t(int32_t row)>& target_pick);

}  // namespace tandem::speculative
