// no_allowed_token: why a position has no token to give, as the Status that
// ends the request (the sampler returned kNoToken, sampler.h).
//
// A request's constraints can contradict each other only at some later step:
// a grammar whose next tokens are all banned by logit_bias, an end-of-text that
// the grammar requires but the request banned. Generation cannot go on without
// producing a token the request forbade, so it stops with an error instead
// (docs/reliability.md "A request whose constraints leave no token"). The
// explanation replays the processor chain on the raw row and names the first
// stage after which nothing is left. Only the error path calls it, so it may
// allocate. Pure function of its arguments (the constraint caches, as always).
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "sampling/params.h"
#include "sampling/processors.h"

namespace tandem::sampling {

// InvalidArgument ("no token is allowed after N generated tokens: <cause>")
// when the request's own constraints masked every token; Internal when the
// model's row itself has no finite logit (NaN or -infinity everywhere).
Status no_allowed_token(std::span<const float> logits, const SamplingParams& params,
                        const TokenHistory& history);

// The stage no_allowed_token blamed, read back from the Status it returned: the engine hands
// callers only the Status, and the server names the request field behind the stage (the error's
// `param`). unknown for any other Status (the model's own row, another error).
enum class DeadEndCause { unknown, grammar, logit_bias, penalties };
DeadEndCause dead_end_cause(const Status& status);

}  // namespace tandem::sampling
