// SequenceState and the steps that advance one sequence: prefill, a classic
// decode step and a speculative round (draft, one verify forward over
// [bonus, drafts...], the accept walk, rollback of the target cache).
//
// Invariant: the target's KV cache holds prompt + generated[0 .. g-2]; the
// last generated token is pending (sampled, not yet fed). Token generated[i]
// sits at absolute position prompt.size() + i and was chosen by the seeded
// sampler at that position, on either path — so a sequence may alternate
// between classic steps (alone or batched) and speculative rounds without
// changing its output (docs/design.md, ADR 0001/0002).
//
// Not thread-safe: engine thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/forward.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"

namespace tandem::speculative {

struct SequenceState {
  model::SequenceId seq = -1;
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  sampling::SamplingParams params;
  // Kept only when an MTP drafter needs them (keep_hidden): the target's
  // final hidden state (after the final norm) at every position whose token
  // is in the target's KV cache, row p at hidden[p * hidden_size].
  std::vector<float> hidden;
  int64_t hidden_size = 0;
  bool keep_hidden = false;

  int64_t pending_position() const { return static_cast<int64_t>(prompt.size() + generated.size()) - 1; }
  sampling::TokenHistory history() const { return {prompt, generated}; }
  // Appends hidden rows [first, first + count) of a forward's output.
  void append_hidden(const model::ForwardOutput& out, int64_t first, int64_t count);
};

struct RoundStats {
  int32_t block_size = 0;  // K this round used: the requested one, or less near a cache's end
  int32_t drafted = 0;
  int32_t accepted = 0;
  int32_t emitted = 0;
  double draft_ms = 0;
  double verify_ms = 0;
  double overhead_ms = 0;  // sampling, accept walk, rollback
  // Not OK when the position after the emitted tokens allows no token (the
  // sampler's kNoToken; sampling/dead_end.h says why): the sequence cannot go
  // on, exactly where classic_step would have returned this error.
  Status dead_end;
};

// Feeds the prompt in chunks of at most `chunk` tokens and samples the first
// generated token from the last row. The sequence's KV must be empty.
//
// prefill and classic_step return sampling::no_allowed_token's error, with
// nothing appended, when the sampled position allows no token.
Status prefill(model::Forward& target, sampling::Sampler& sampler, SequenceState& s, int64_t chunk = 256);

// Feeds the pending token and samples the next one. chain: another classic step
// follows (ForwardOptions::chain: on a GPU it is queued ahead, ADR 0090).
Status classic_step(model::Forward& target, sampling::Sampler& sampler, SequenceState& s, bool chain = false);

// The block size a round at pending position L may use when every position it
// touches (the target's verify rows L .. L+K-1, the drafts at L+1 .. L+K-1)
// must lie below `position_limit`: min(block_size, position_limit - L), and
// at least 1. Below 2 there is no room for a draft: a classic step is what
// fits.
int fitting_block_size(int block_size, int64_t pending_position, int64_t position_limit);

// One speculative round with block size K (1 bonus + K-1 drafts). Appends the
// emitted tokens (accepted drafts + the target's own token) to s.generated.
// A verify row that allows no token ends the walk there: the tokens before it
// are appended and RoundStats::dead_end holds the error (emitted = accepted).
// With `logprobs`, also appends one SampleResult per emitted token (its
// logprob and top_logprobs, from the verify row that chose it — the row a
// classic step at that position computes bitwise).
//
// K shrinks (fitting_block_size) so that the round stays below
// `position_limit` (0: the room the target's cache has for s.seq, its held
// blocks plus the free pool) and below the drafter's position_limit(); when
// it would drop below 2 the round verifies the bonus alone without asking
// the drafter — exactly a classic step. Near the end of a cache the output is
// therefore still classic decoding's, never a "does not fit" error.
Expected<RoundStats> speculative_round(model::Forward& target, Drafter& drafter, sampling::Sampler& sampler,
                                       SequenceState& s, int block_size,
                                       std::vector<sampling::SampleResult>* logprobs = nullptr,
                                       int64_t position_limit = 0);

}  // namespace tandem::speculative
