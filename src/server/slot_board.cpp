#include "server/slot_board.h"

#include <algorithm>

namespace tandem::server {

using nlohmann::json;

json llama_params_json(const sampling::SamplingParams& p, int32_t n_predict,
                       const std::vector<std::string>& stop, bool stream, int64_t seed) {
  return {{"n_predict", n_predict},
          {"seed", seed},
          {"temperature", p.temperature},
          {"top_k", p.top_k},
          {"top_p", p.top_p},
          {"min_p", p.min_p},
          {"repeat_penalty", p.repetition_penalty},
          {"presence_penalty", p.presence_penalty},
          {"frequency_penalty", p.frequency_penalty},
          {"stop", stop},
          {"stream", stream},
          {"n_probs", p.top_logprobs}};
}

SlotBoard::SlotBoard(int32_t slots, int64_t n_ctx, bool speculative)
    : slots_(static_cast<size_t>(slots > 0 ? slots : 1)), n_ctx_(n_ctx), speculative_(speculative) {}

SlotBoard::Lease::~Lease() {
  if (!board_) return;
  std::lock_guard<std::mutex> lock(board_->mu_);
  board_->slots_[static_cast<size_t>(slot_)] = Slot{};
}

void SlotBoard::Lease::set_decoded(int64_t n) const {
  if (!board_) return;
  std::lock_guard<std::mutex> lock(board_->mu_);
  board_->slots_[static_cast<size_t>(slot_)].n_decoded = n;
}

SlotBoard::Lease SlotBoard::acquire(const SlotTask& task) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].busy) continue;
    slots_[i] = Slot{true, task, 0};
    return Lease(this, static_cast<int32_t>(i));
  }
  return Lease();
}

json SlotBoard::slot_json(int32_t id, const Slot& s) const {
  const int64_t remain = s.task.n_predict < 0 ? -1 : std::max<int64_t>(0, s.task.n_predict - s.n_decoded);
  return {{"id", id},
          {"id_task", s.busy ? static_cast<int64_t>(s.task.id_task) : int64_t{-1}},
          {"n_ctx", n_ctx_},
          {"speculative", speculative_},
          {"is_processing", s.busy},
          {"n_prompt_tokens", s.task.n_prompt_tokens},
          {"params", llama_params_json(s.task.params, s.task.n_predict, s.task.stop, s.task.stream,
                                       static_cast<int64_t>(s.task.params.seed))},
          {"next_token", {{"has_next_token", s.busy}, {"n_remain", remain}, {"n_decoded", s.n_decoded}}}};
}

json SlotBoard::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  json out = json::array();
  for (size_t i = 0; i < slots_.size(); ++i) out.push_back(slot_json(static_cast<int32_t>(i), slots_[i]));
  return out;
}

json SlotBoard::idle_slot_json(int32_t id, const sampling::SamplingParams& defaults,
                               std::optional<uint64_t> seed) const {
  Slot idle;
  idle.task.params = defaults;
  json j = slot_json(id, idle);
  j["params"]["seed"] = seed ? json(*seed) : json(-1);  // -1: each request draws a random one
  return j;
}

}  // namespace tandem::server
