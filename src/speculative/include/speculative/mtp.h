// MtpDrafter: the `mtp` kind — a DeepSeek-V3-style next-token module that
// drafts from the target's own final hidden states (format and semantics:
// docs/formats.md "MTP head"; executable definition tools/train/mtp.py).
//
// The head keeps its own KV cache of *entries*: the entry for token position
// p >= 1 is u_p = eh_proj([enorm(E x_p), hnorm(h_{p-1})]) at RoPE position p
// (KV slot p - 1). propose() first appends the real entries the cache lacks
// (from the target's hidden states), whose last one yields the first draft;
// further drafts are recursive entries built from the head's own output,
// dropped again at the next propose(). The head is either its own directory
// (load) or MTP layers stored in the target's checkpoint (load_embedded); the
// two differ only in data (model/mtp_layout.h: tensor names, the concat
// order, and the RoPE position, p for tandem's head and p - 1 for MiMo's).
// Not thread-safe: engine thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/mtp_layout.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"

namespace tandem::speculative {

class MtpDrafter final : public Drafter {
 public:
  // Loads the head in DIR for `target` (which must outlive the drafter); its
  // cache holds `max_tokens` positions plus a margin.
  // Errors name the file and the mismatching value (hidden or vocab size).
  static Expected<std::unique_ptr<MtpDrafter>> load(const std::string& dir, const model::Model& target,
                                                    ThreadPool* pool, int64_t max_tokens);
  // The same with the head's config.json already parsed.
  static Expected<std::unique_ptr<MtpDrafter>> load(const std::string& dir, nlohmann::json config,
                                                    const model::Model& target, ThreadPool* pool,
                                                    int64_t max_tokens);

  // Drafts with the MTP layers stored inside `target`'s own checkpoint
  // (model::find_embedded_mtp_layout: MiMo's model.mtp_layers.0). NotFound
  // naming the directory when it holds none; Unimplemented for DeepSeek-V3's.
  static Expected<std::unique_ptr<MtpDrafter>> load_embedded(const model::Model& target, ThreadPool* pool,
                                                             int64_t max_tokens);

  DraftKind kind() const override { return DraftKind::mtp; }
  Expected<std::vector<int32_t>> propose(const DraftRequest& request) override;
  void reset() override;
  // The cache's capacity (an entry for position p sits in slot p - 1, so this
  // is one position conservative).
  int64_t position_limit() const override { return int64_t{kv_.num_blocks()} * kv_.tokens_per_block(); }
  const model::MtpLayout& layout() const { return layout_; }
  std::string describe() const override { return "mtp:" + block_->dir(); }
  void set_gemm_mode(kernels::GemmMode mode) override { forward_->set_gemm_mode(mode); }

  // Depth-1 logits for real entries at token positions [first, first + count)
  // given tokens x_0..x_{n-1} and target hidden rows h_0..h_{n-2} (test hook
  // for the golden values; resets the drafter's sequence).
  Expected<std::vector<float>> depth1_logits(std::span<const int32_t> tokens, std::span<const float> hidden,
                                             int64_t first, int64_t count);

 private:
  MtpDrafter() = default;
  // The fusion weights of layout_ (from block_'s checkpoint), the cache and the forward.
  Status init(ThreadPool* pool, int64_t max_tokens);
  // u rows for entries built from (hidden rows, token ids) into fused_.
  void fuse(const float* hidden_rows, const int32_t* tokens, int64_t rows);
  // pick_params: the last row's pick only (the token at first_position + rows) where
  // forward_pick_rule allows (pick.h); null: the rows.
  Expected<model::ForwardOutput> run_entries(const int32_t* tokens, int64_t rows, int64_t first_position,
                                             model::LogitRows logits,
                                             const sampling::SamplingParams* pick_params = nullptr);

  std::vector<kernels::PickRule> pick_rules_;  // run_entries' sampled rule
  const model::Model* target_ = nullptr;
  model::MtpLayout layout_;
  std::unique_ptr<model::Model> block_;  // one decoder layer + final norm; target's embedding and LM head
  std::vector<float> enorm_, hnorm_;
  kernels::PackedMatrix eh_proj_;  // [H, 2H]: eh_proj (tandem) or input_proj (MiMo)
  model::KvCache kv_;
  std::unique_ptr<model::Forward> forward_;
  sampling::Sampler sampler_;
  model::SequenceId seq_ = -1;
  int64_t real_entries_ = 0;           // entries for positions 1..real_entries_ are real
  std::vector<int32_t> entry_tokens_;  // x_p of each real entry, to detect a changed context
  std::vector<float> emb_, cat_, fused_, last_out_;
  std::vector<int32_t> history_;
};

}  // namespace tandem::speculative
