#include "speculative/sequence.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/check.h"
#include "sampling/dead_end.h"
#include "speculative/accept_walk.h"
#include "speculative/pick.h"

namespace tandem::speculative {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// `count` output rows picking the tokens at positions first, first + 1, …; want_logprobs: the rows
// themselves are needed (else a plain greedy or plain sampled request takes picks, ADR 0070, 0072).
model::ForwardOptions options_for(const SequenceState& s, int64_t first, int64_t count,
                                  std::vector<kernels::PickRule>& rules, bool want_logprobs = false) {
  model::ForwardOptions o = pick_options(s.params, want_logprobs, first, count, rules);
  if (s.keep_hidden) {
    o.hidden = model::HiddenOutput::after_final_norm;
    o.hidden_all_rows = true;
  }
  return o;
}

std::span<const float> logits_row(const model::ForwardOutput& out, int64_t row) {
  return {out.logits_row(row), static_cast<size_t>(out.vocab)};
}

// Picks the token after s's generated tokens from output row 0 and appends it; at a position
// that allows none, appends nothing and returns why.
Status pick_next(sampling::Sampler& sampler, SequenceState& s, const model::ForwardOutput& out,
                 int64_t position) {
  const int32_t token = pick_row(sampler, out, 0, s.params, s.history(), position);
  if (token == sampling::kNoToken)
    return sampling::no_allowed_token(logits_row(out, 0), s.params, s.history());
  s.generated.push_back(token);
  return Status::Ok();
}

}  // namespace

void SequenceState::append_hidden(const model::ForwardOutput& out, int64_t first, int64_t count) {
  if (!keep_hidden) return;
  hidden_size = out.hidden_size;
  const float* h = out.hidden.data() + first * out.hidden_size;
  hidden.insert(hidden.end(), h, h + count * out.hidden_size);
}

Status prefill(model::Forward& target, sampling::Sampler& sampler, SequenceState& s, int64_t chunk) {
  if (s.prompt.empty()) return invalid_argument("the prompt is empty: at least one token is needed");
  if (target.kv().length(s.seq) != 0) return failed_precondition("prefill needs an empty KV sequence");
  s.generated.clear();
  s.hidden.clear();
  const int64_t n = static_cast<int64_t>(s.prompt.size());
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    const bool last = start + len == n;
    model::SequenceStep step{s.seq, std::span<const int32_t>(s.prompt.data() + start, len), start,
                             last ? model::LogitRows::last : model::LogitRows::none};
    std::vector<kernels::PickRule> rules;
    auto out =
        target.run(std::span<const model::SequenceStep>(&step, 1), options_for(s, n, last ? 1 : 0, rules));
    if (!out.ok()) return out.status();
    s.append_hidden(*out, 0, len);
    if (last) return pick_next(sampler, s, *out, n);
  }
  return Status::Ok();
}

Status classic_step(model::Forward& target, sampling::Sampler& sampler, SequenceState& s, bool chain) {
  if (s.generated.empty()) return failed_precondition("classic_step before prefill");
  const int64_t pos = s.pending_position();
  model::SequenceStep step{s.seq, std::span<const int32_t>(&s.generated.back(), 1), pos,
                           model::LogitRows::last};
  std::vector<kernels::PickRule> rules;
  model::ForwardOptions options = options_for(s, pos + 1, 1, rules);
  options.chain = chain;
  auto out = target.run(std::span<const model::SequenceStep>(&step, 1), options);
  if (!out.ok()) return out.status();
  s.append_hidden(*out, 0, 1);
  return pick_next(sampler, s, *out, pos + 1);
}

int fitting_block_size(int block_size, int64_t pending_position, int64_t position_limit) {
  return static_cast<int>(std::clamp<int64_t>(position_limit - pending_position, 1, block_size));
}

Expected<RoundStats> speculative_round(model::Forward& target, Drafter& drafter, sampling::Sampler& sampler,
                                       SequenceState& s, int block_size,
                                       std::vector<sampling::SampleResult>* logprobs,
                                       int64_t position_limit) {
  if (s.generated.empty()) return failed_precondition("speculative_round before prefill");
  if (block_size < 2)
    return invalid_argument("block size must be at least 2, got " + std::to_string(block_size));
  const int64_t L = s.pending_position();
  if (position_limit <= 0) {
    const model::KvCache& kv = target.kv();
    position_limit = int64_t{kv.held_blocks(s.seq) + kv.free_blocks()} * kv.tokens_per_block();
  }
  const int k = fitting_block_size(block_size, L, std::min(position_limit, drafter.position_limit()));
  RoundStats stats;
  stats.block_size = k;
  const auto t_draft = Clock::now();
  std::vector<int32_t> drafts;
  if (k >= 2) {
    DraftRequest request{s.prompt, s.generated, k - 1, &s.params, s.hidden, s.hidden_size};
    TANDEM_ASSIGN_OR_RETURN(drafts, drafter.propose(request));
  }
  stats.draft_ms = ms_since(t_draft);
  stats.drafted = static_cast<int32_t>(drafts.size());

  const auto t_verify = Clock::now();
  std::vector<int32_t> block;
  block.reserve(drafts.size() + 1);
  block.push_back(s.generated.back());
  block.insert(block.end(), drafts.begin(), drafts.end());
  model::SequenceStep step{s.seq, block, L, model::LogitRows::all};
  std::vector<kernels::PickRule> rules;
  auto out =
      target.run(std::span<const model::SequenceStep>(&step, 1),
                 options_for(s, L + 1, static_cast<int64_t>(block.size()), rules, logprobs != nullptr));
  if (!out.ok()) return out.status();
  stats.verify_ms = ms_since(t_verify);

  const auto t_walk = Clock::now();
  std::vector<int32_t> history = s.generated;
  AcceptResult walk = accept_walk(drafts, [&](int32_t j) {
    if (j > 0) history.push_back(drafts[j - 1]);
    return pick_row(sampler, *out, j, s.params, {s.prompt, history}, L + 1 + j);
  });
  if (logprobs != nullptr) {
    // Emitted token j came from verify row j with the history the walk used for it.
    std::vector<int32_t> before = s.generated;
    for (size_t j = 0; j < walk.emitted.size(); ++j) {
      const int64_t pos = L + 1 + static_cast<int64_t>(j);
      logprobs->push_back(
          sampler.sample(logits_row(*out, static_cast<int64_t>(j)), s.params, {s.prompt, before}, pos, true));
      TANDEM_CHECK(logprobs->back().token == walk.emitted[j]);
      before.push_back(walk.emitted[j]);
    }
  }
  // The positions that stay in the target's cache: all but the last emitted token, which is
  // pending (at a dead end that is the last accepted draft, or the bonus when none was).
  const int32_t kept = walk.accepted + (walk.dead_end ? 0 : 1);
  s.append_hidden(*out, 0, kept);
  target.kv().truncate(s.seq, L + kept);
  s.generated.insert(s.generated.end(), walk.emitted.begin(), walk.emitted.end());
  if (walk.dead_end) {
    const size_t row = walk.emitted.size();  // the verify row that allows no token
    stats.dead_end =
        sampling::no_allowed_token(logits_row(*out, static_cast<int64_t>(row)), s.params, s.history());
  }
  stats.accepted = walk.accepted;
  stats.emitted = static_cast<int32_t>(walk.emitted.size());
  stats.overhead_ms = ms_since(t_walk);
  return stats;
}

}  // namespace tandem::speculative
