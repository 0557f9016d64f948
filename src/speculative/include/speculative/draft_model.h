// DraftModelDrafter: the `draft` kind — an independent small causal LM with
// the target's tokenizer and its own paged KV cache.
//
// propose() catches the draft cache up with the committed tokens (keeping
// the longest prefix it already holds, so accepted drafts are not re-fed),
// then samples `count` tokens one position at a time with the target's
// seeded sampler. Not thread-safe: engine thread only.
#pragma once

#include <memory>
#include <string>

#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"
#include "tokenizer/tokenizer.h"

namespace tandem::speculative {

class DraftModelDrafter final : public Drafter {
 public:
  // Loads DIR; the draft cache holds up to `max_tokens` positions.
  static Expected<std::unique_ptr<DraftModelDrafter>> load(const std::string& dir, ThreadPool* pool,
                                                           int64_t max_tokens);
  // The same with DIR's config.json already parsed.
  // `placement`: where the draft model's forward runs (the target's, normally).
  static Expected<std::unique_ptr<DraftModelDrafter>> load(const std::string& dir, model::ModelConfig config,
                                                           ThreadPool* pool, int64_t max_tokens,
                                                           const model::Placement& placement = {});
  // Checks that a drafter directory can serve `target_dir`'s model: same
  // vocabulary size, and when both ship tokenizer.json, the same token→id map
  // for every token of the target's (base vocabulary and added/special
  // tokens, through the tokenizer library). Errors name both values.
  static Status check_compatible(const std::string& target_dir, const model::ModelConfig& target,
                                 const std::string& draft_dir, const model::ModelConfig& draft);
  // The same with the tokenizers already loaded (null: that directory ships none).
  static Status check_compatible(const std::string& target_dir, const model::ModelConfig& target,
                                 const tok::Tokenizer* target_tokenizer, const std::string& draft_dir,
                                 const model::ModelConfig& draft, const tok::Tokenizer* draft_tokenizer);

  DraftKind kind() const override { return DraftKind::draft; }
  Expected<std::vector<int32_t>> propose(const DraftRequest& request) override;
  void reset() override;
  // The cache's capacity: propose() feeds positions up to the last-but-one draft.
  int64_t position_limit() const override { return int64_t{kv_.num_blocks()} * kv_.tokens_per_block(); }
  std::string describe() const override { return "draft:" + model_->dir(); }
  void set_gemm_mode(kernels::GemmMode mode) override { forward_->set_gemm_mode(mode); }
  const model::Model& model() const { return *model_; }

 private:
  DraftModelDrafter() = default;

  std::unique_ptr<model::Model> model_;
  model::KvCache kv_;
  std::unique_ptr<model::Forward> forward_;
  sampling::Sampler sampler_;
  model::SequenceId seq_ = -1;
  std::vector<int32_t> cached_;  // tokens whose K/V are valid in kv_
  std::vector<int32_t> scratch_tokens_, scratch_history_;
};

}  // namespace tandem::speculative
