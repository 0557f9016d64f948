#include "scheduler/batch_planner.h"

#include <algorithm>

namespace tandem::scheduler {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::queued:
      return "queued";
    case Phase::prefilling:
      return "prefilling";
    case Phase::decoding:
      return "decoding";
    case Phase::finished:
      return "finished";
  }
  return "finished";
}

BatchPlanner::BatchPlanner(PlannerConfig config) : config_(config), free_blocks_(config.total_blocks) {}

int32_t BatchPlanner::blocks_needed(int64_t prompt_tokens, int64_t max_tokens) const {
  const int64_t positions = prompt_tokens + max_tokens;
  return static_cast<int32_t>((positions + config_.tokens_per_block - 1) / config_.tokens_per_block);
}

void BatchPlanner::enqueue(uint64_t id, int64_t prompt_tokens, int64_t max_tokens) {
  Slot s;
  s.prompt_tokens = prompt_tokens;
  s.max_tokens = max_tokens;
  slots_[id] = s;
  queue_.push_back(id);
}

void BatchPlanner::cancel(uint64_t id) {
  auto it = slots_.find(id);
  if (it != slots_.end()) it->second.cancelled = true;
}

std::optional<Phase> BatchPlanner::phase(uint64_t id) const {
  auto it = slots_.find(id);
  if (it == slots_.end()) return std::nullopt;
  return it->second.phase;
}

int BatchPlanner::decoding() const {
  int n = 0;
  for (uint64_t id : running_) n += slots_.at(id).phase == Phase::decoding;
  return n;
}

void BatchPlanner::drop(uint64_t id, TickPlan& plan) {
  finish(id);
  plan.dropped.push_back(id);
}

TickPlan BatchPlanner::plan(bool speculation_available) {
  TickPlan plan;
  std::vector<uint64_t> cancelled;
  for (const auto& [id, slot] : slots_)
    if (slot.cancelled) cancelled.push_back(id);
  for (uint64_t id : cancelled) drop(id, plan);

  while (!queue_.empty() && running() < config_.max_running) {
    Slot& s = slots_.at(queue_.front());
    const int32_t need = blocks_needed(s.prompt_tokens, s.max_tokens);
    if (need > free_blocks_) break;
    free_blocks_ -= need;
    s.reserved = need;
    s.phase = Phase::prefilling;
    running_.push_back(queue_.front());
    plan.admitted.push_back(queue_.front());
    if (admit_hook_) s.prefilled = std::clamp<int64_t>(admit_hook_(queue_.front()), 0, s.prompt_tokens - 1);
    queue_.pop_front();
  }

  std::vector<uint64_t> decoding_ids;
  for (uint64_t id : running_)
    if (slots_.at(id).phase == Phase::decoding) decoding_ids.push_back(id);
  if (decoding_ids.size() == 1 && speculation_available) {
    plan.speculative = decoding_ids[0];
  } else {
    plan.decode = decoding_ids;
  }

  int64_t budget = config_.prefill_budget;
  for (uint64_t id : running_) {
    if (budget <= 0) break;
    const Slot& s = slots_.at(id);
    if (s.phase != Phase::prefilling) continue;
    const int64_t len = std::min(budget, s.prompt_tokens - s.prefilled);
    plan.prefill.push_back({id, s.prefilled, len, s.prefilled + len == s.prompt_tokens});
    budget -= len;
  }
  return plan;
}

void BatchPlanner::on_prefilled(uint64_t id, int64_t tokens) {
  auto it = slots_.find(id);
  if (it == slots_.end()) return;
  Slot& s = it->second;
  s.prefilled = std::min(s.prompt_tokens, s.prefilled + tokens);
  if (s.prefilled == s.prompt_tokens && s.phase == Phase::prefilling) s.phase = Phase::decoding;
}

void BatchPlanner::finish(uint64_t id) {
  auto it = slots_.find(id);
  if (it == slots_.end()) return;
  free_blocks_ += it->second.reserved;
  std::erase(running_, id);
  std::erase(queue_, id);
  slots_.erase(it);
}

}  // namespace tandem::scheduler
