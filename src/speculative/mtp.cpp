#include "speculative/mtp.h"

#include <algorithm>
#include <cstring>

#include "speculative/pick.h"

namespace tandem::speculative {

Expected<std::unique_ptr<MtpDrafter>> MtpDrafter::load(const std::string& dir, const model::Model& target,
                                                       ThreadPool* pool, int64_t max_tokens) {
  TANDEM_ASSIGN_OR_RETURN(nlohmann::json config, model::read_json_file(dir + "/config.json"));
  return load(dir, std::move(config), target, pool, max_tokens);
}

Expected<std::unique_ptr<MtpDrafter>> MtpDrafter::load(const std::string& dir, nlohmann::json config,
                                                       const model::Model& target, ThreadPool* pool,
                                                       int64_t max_tokens) {
  std::unique_ptr<MtpDrafter> d(new MtpDrafter());
  d->target_ = &target;
  d->layout_ = model::tandem_head_layout();
  TANDEM_ASSIGN_OR_RETURN(d->block_, model::Model::load_mtp_block(dir, std::move(config), target));
  TANDEM_RETURN_IF_ERROR(d->init(pool, max_tokens));
  return d;
}

Expected<std::unique_ptr<MtpDrafter>> MtpDrafter::load_embedded(const model::Model& target, ThreadPool* pool,
                                                                int64_t max_tokens) {
  std::unique_ptr<MtpDrafter> d(new MtpDrafter());
  d->target_ = &target;
  TANDEM_ASSIGN_OR_RETURN(d->layout_, model::find_embedded_mtp_layout(target.checkpoint(), target.config()));
  TANDEM_ASSIGN_OR_RETURN(d->block_, model::Model::load_embedded_mtp_block(target, d->layout_));
  TANDEM_RETURN_IF_ERROR(d->init(pool, max_tokens));
  return d;
}

Status MtpDrafter::init(ThreadPool* pool, int64_t max_tokens) {
  // The block runs where its target does (it reads the target's device embedding and LM head).
  TANDEM_RETURN_IF_ERROR(block_->place_on(target_->placement()));
  const int64_t h = target_->config().hidden_size;
  const model::Checkpoint& ck = block_->checkpoint();
  TANDEM_ASSIGN_OR_RETURN(const model::TensorView* enorm, ck.get(layout_.embedding_norm, {h}));
  TANDEM_ASSIGN_OR_RETURN(const model::TensorView* hnorm, ck.get(layout_.hidden_norm, {h}));
  TANDEM_ASSIGN_OR_RETURN(const model::TensorView* proj, ck.get(layout_.projection, {h, 2 * h}));
  enorm_.resize(h);
  hnorm_.resize(h);
  kernels::to_f32(enorm->data, enorm->dtype, h, enorm_.data());
  kernels::to_f32(hnorm->data, hnorm->dtype, h, hnorm_.data());
  eh_proj_ = kernels::PackedMatrix::pack(proj->data, proj->dtype, h, 2 * h);
  TANDEM_ASSIGN_OR_RETURN(
      kv_, model::KvCache::create(block_->config(), model::KvCache::options_for_tokens(max_tokens + 32)));
  forward_ = std::make_unique<model::Forward>(*block_, kv_, pool, 64);
  return Status::Ok();
}

void MtpDrafter::reset() {
  if (seq_ >= 0) kv_.release(seq_);
  seq_ = -1;
  real_entries_ = 0;
  entry_tokens_.clear();
}

void MtpDrafter::fuse(const float* hidden_rows, const int32_t* tokens, int64_t rows) {
  const int64_t h = target_->config().hidden_size;
  const float eps = block_->config().rms_norm_eps;
  kernels::Ctx ctx;
  ctx.pool = forward_->ctx().pool;
  ctx.gemm = forward_->gemm_mode();
  emb_.resize(static_cast<size_t>(rows * h));
  cat_.resize(static_cast<size_t>(rows * 2 * h));
  fused_.resize(static_cast<size_t>(rows * h));
  kernels::embedding(ctx, target_->embedding(), target_->embedding_dtype(), h, tokens, rows, emb_.data());
  for (int64_t r = 0; r < rows; ++r) {
    // The projection's input order is the layout's: tandem's head reads concat[e, h], MiMo's concat[h, e].
    float* row = cat_.data() + r * 2 * h;
    float* e_part = layout_.hidden_first ? row + h : row;
    float* h_part = layout_.hidden_first ? row : row + h;
    kernels::rmsnorm(ctx, emb_.data() + r * h, enorm_.data(), e_part, 1, h, eps);
    kernels::rmsnorm(ctx, hidden_rows + r * h, hnorm_.data(), h_part, 1, h, eps);
  }
  kernels::matmul(ctx, cat_.data(), rows, eh_proj_, fused_.data());
}

Expected<model::ForwardOutput> MtpDrafter::run_entries(const int32_t* tokens, int64_t rows,
                                                       int64_t first_position, model::LogitRows logits,
                                                       const sampling::SamplingParams* pick_params) {
  model::SequenceStep step;
  step.seq = seq_;
  step.tokens = std::span<const int32_t>(tokens, static_cast<size_t>(rows));
  step.start_position = first_position - 1;  // entry for position p lives in KV slot p - 1
  step.rope_offset = layout_.rope_offset;
  step.logits = logits;
  step.embeddings = std::span<const float>(fused_.data(), fused_.size());
  model::ForwardOptions options;
  if (pick_params != nullptr)
    options = pick_options(*pick_params, false, first_position + rows, 1, pick_rules_);
  options.hidden = model::HiddenOutput::after_final_norm;
  return forward_->run(std::span<const model::SequenceStep>(&step, 1), options);
}

Expected<std::vector<int32_t>> MtpDrafter::propose(const DraftRequest& r) {
  std::vector<int32_t> drafts;
  if (r.count <= 0 || r.generated.empty()) return drafts;
  const int64_t h = target_->config().hidden_size;
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  const int64_t L = n_prompt + static_cast<int64_t>(r.generated.size()) - 1;  // the pending token's position
  if (r.hidden_size != h || static_cast<int64_t>(r.target_hidden.size()) < L * h)
    return failed_precondition(
        "MTP drafter needs the target's hidden state at every position before the bonus");
  auto token_at = [&](int64_t p) { return p < n_prompt ? r.prompt[p] : r.generated[p - n_prompt]; };
  if (seq_ < 0) {
    seq_ = kv_.create_sequence();
    real_entries_ = 0;
    entry_tokens_.clear();
  }
  // Keep the real entries whose tokens still match; recursive ones always go.
  int64_t keep = 0;
  while (keep < real_entries_ && keep < L && entry_tokens_[keep] == token_at(keep + 1)) ++keep;
  kv_.truncate(seq_, keep);
  real_entries_ = keep;
  entry_tokens_.resize(keep);

  // Real entries for positions keep+1 .. L; the last one drafts d_1.
  std::vector<int32_t> tokens;
  for (int64_t p = keep + 1; p <= L; ++p) tokens.push_back(token_at(p));
  const int64_t rows = static_cast<int64_t>(tokens.size());
  if (rows == 0) return failed_precondition("MTP drafter: nothing to draft from");
  fuse(r.target_hidden.data() + keep * h, tokens.data(), rows);
  // Drafts need no logprobs: the picks where the forward can make them.
  auto out = run_entries(tokens.data(), rows, keep + 1, model::LogitRows::last, r.params);
  if (!out.ok()) {
    reset();
    return out.status();
  }
  real_entries_ = L;
  entry_tokens_.insert(entry_tokens_.end(), tokens.begin(), tokens.end());

  history_.assign(r.generated.begin(), r.generated.end());
  for (int32_t i = 0; i < r.count; ++i) {
    const int32_t d = pick_row(sampler_, *out, 0, *r.params, {r.prompt, history_}, L + 1 + i);
    if (d == sampling::kNoToken) break;  // nothing allowed here: the verify row will say so
    drafts.push_back(d);
    history_.push_back(d);
    if (i + 1 == r.count) break;
    // Recursive entry at position L+1+i from (o_{L+i}, d).
    last_out_.assign(out->hidden.begin(), out->hidden.begin() + h);
    fuse(last_out_.data(), &drafts.back(), 1);
    out = run_entries(&drafts.back(), 1, L + 1 + i, model::LogitRows::last, r.params);
    if (!out.ok()) {
      reset();
      return out.status();
    }
  }
  return drafts;
}

Expected<std::vector<float>> MtpDrafter::depth1_logits(std::span<const int32_t> tokens,
                                                       std::span<const float> hidden, int64_t first,
                                                       int64_t count) {
  reset();
  seq_ = kv_.create_sequence();
  const int64_t h = target_->config().hidden_size;
  const int64_t last = first + count - 1;
  if (first < 1 || last >= static_cast<int64_t>(tokens.size()) ||
      static_cast<int64_t>(hidden.size()) < last * h)
    return invalid_argument("depth1_logits: positions out of range");
  fuse(hidden.data(), tokens.data() + 1, last);
  auto out = run_entries(tokens.data() + 1, last, 1, model::LogitRows::all);
  if (!out.ok()) return out.status();
  const int64_t v = out->vocab;
  std::vector<float> logits(out->logits.begin() + (first - 1) * v, out->logits.begin() + last * v);
  reset();
  return logits;
}

}  // namespace tandem::speculative
