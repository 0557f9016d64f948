// forward_chain.cpp — Forward's decode-ahead bookkeeping (ADR 0090): when a
// run() may queue the next step of its sequences on the device, and whether a
// later run() is exactly that step. The device work is CudaForward's
// (enqueue_chained / collect_chained / discard_chained); the KV lengths and
// blocks move only with the run() that asks for a step, so a dropped step
// leaves nothing behind but a K/V write beyond a sequence's length (rewritten
// by the next step at that position before anything reads it).
#include <cstring>

#include "model/forward.h"

#ifdef TANDEM_HAVE_CUDA
#include "cuda_forward.h"
#endif

namespace tandem::model {
namespace {

bool same_rule(const kernels::PickRule& a, const kernels::PickRule& b) {
  return a.temperature == b.temperature && a.needs_row == b.needs_row && a.seed == b.seed &&
         a.position == b.position;
}

// The block holding `position` of `seq`, or -1 when the sequence holds none there.
int32_t block_at(const KvCache& kv, SequenceId seq, int64_t position) {
  const int64_t index = position / kv.tokens_per_block();
  return index < kv.held_blocks(seq) ? kv.block_table(seq)[index] : -1;
}

// What a chained step and the call that takes it both are: one-token steps with
// their picks only, on the invariant GEMMs.
bool decode_shaped(std::span<const SequenceStep> steps, const ForwardOptions& options,
                   kernels::GemmMode gemm) {
  if (!options.picks_only || options.hidden != HiddenOutput::none || gemm != kernels::GemmMode::invariant)
    return false;
  for (const SequenceStep& s : steps)
    if (s.tokens.size() != 1 || s.logits != LogitRows::last || !s.embeddings.empty() || s.rope_offset != 0)
      return false;
  return true;
}

}  // namespace

bool Forward::device_chain_pending() const {
#ifdef TANDEM_HAVE_CUDA
  return cuda_ != nullptr && cuda_->chained_pending();
#else
  return false;
#endif
}

bool Forward::device_can_chain() const {
#ifdef TANDEM_HAVE_CUDA
  return cuda_ != nullptr && cuda_->can_chain() && picked_on_device();
#else
  return false;
#endif
}

bool Forward::chained_matches(std::span<const SequenceStep> steps, const ForwardOptions& options) const {
  if (!device_chain_pending() || chained_.size() != steps.size() || !decode_shaped(steps, options, ctx_.gemm))
    return false;
  if (options.pick_rules.size() != chained_rules_.size()) return false;
  for (size_t i = 0; i < chained_rules_.size(); ++i)
    if (!same_rule(options.pick_rules[i], chained_rules_[i])) return false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& s = steps[i];
    const ChainedRow& c = chained_[i];
    if (s.seq != c.seq || !kv_.valid(s.seq) || kv_.serial(s.seq) != c.serial) return false;
    if (c.token < 0 || s.tokens[0] != c.token) return false;
    if (s.start_position != c.position || kv_.length(s.seq) != c.position) return false;
    if (block_at(kv_, s.seq, c.position) != c.block) return false;
  }
  return true;
}

bool Forward::plan_chain(std::span<const SequenceStep> steps, const ForwardOptions& options) {
  const int64_t rows = static_cast<int64_t>(tokens_.size());
  if (!options.chain || !device_can_chain() || !decode_shaped(steps, options, ctx_.gemm)) return false;
  // One graphed chunk (16: CudaForward's graphed rows), no rule that needs its row.
  if (rows > 16 || rows > max_rows_) return false;
  for (const kernels::PickRule& rule : options.pick_rules)
    if (rule.needs_row != 0) return false;
  // The next position inside the blocks each sequence holds: the step ahead never takes a block.
  for (const SequenceStep& s : steps)
    if (kv_.blocks_needed(s.seq, s.start_position + 2) != 0) return false;
  next_tokens_.assign(static_cast<size_t>(rows), 0);  // the device reads this step's picks instead
  next_positions_.resize(static_cast<size_t>(rows));
  next_rope_.resize(static_cast<size_t>(rows));
  next_wants_.assign(static_cast<size_t>(rows), 1);
  for (int64_t r = 0; r < rows; ++r) {
    next_positions_[r] = positions_[r] + 1;
    next_rope_[r] = rope_positions_[r] + 1;
  }
  next_rules_.assign(options.pick_rules.begin(), options.pick_rules.end());
  for (kernels::PickRule& rule : next_rules_) rule.position += 1;
  return true;
}

void Forward::remember_chain(std::span<const SequenceStep> steps) {
  chained_.clear();
  if (!device_chain_pending()) return;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& s = steps[i];
    const int64_t position = s.start_position + 1;
    chained_.push_back({s.seq, kv_.serial(s.seq), position, picks_[i], block_at(kv_, s.seq, position)});
  }
  chained_rules_ = next_rules_;
}

}  // namespace tandem::model
