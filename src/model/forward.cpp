#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/check.h"

#ifdef TANDEM_HAVE_CUDA
#include "cuda_forward.h"
#else
namespace tandem::model {
class CudaForward {};  // never constructed without CUDA; complete for ~Forward's unique_ptr
}  // namespace tandem::model
#endif

namespace tandem::model {

Forward::Forward(const Model& model, KvCache& kv, ThreadPool* pool, int64_t max_rows)
    : model_(model), kv_(kv), max_rows_(std::max<int64_t>(1, max_rows)) {
  ctx_.pool = pool;
  const ModelConfig& c = model.config();
  const size_t rows = static_cast<size_t>(max_rows_);
  // The widest layer's shapes (they differ per layer in gemma4).
  int64_t q_max = 0, kv_max = 0, ffn_max = 0, head_max = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    q_max = std::max(q_max, c.layer_q_dim(l));
    kv_max = std::max(kv_max, c.layer_kv_dim(l));
    ffn_max = std::max(ffn_max, c.layer_ffn(l));
    head_max = std::max<int64_t>(head_max, c.layer_head_dim(l));
  }
  x_.allocate(rows * c.hidden_size);
  h_.allocate(rows * c.hidden_size);
  gather_.allocate(rows * c.hidden_size);
  qkv_.allocate(rows * static_cast<size_t>(q_max + 2 * kv_max));
  q_.allocate(rows * q_max);
  k_.allocate(rows * kv_max);
  v_.allocate(rows * kv_max);
  attn_.allocate(rows * q_max);
  gate_up_.allocate(rows * 2 * ffn_max);
  act_.allocate(rows * ffn_max);
  if (c.moe.num_experts > 0) allocate_moe_scratch();
  if (c.v_norm || c.moe_beside_mlp)
    ones_.assign(static_cast<size_t>(std::max(head_max, c.hidden_size)), 1.0f);
  if (c.moe_beside_mlp) {
    moe_x_.allocate(rows * c.hidden_size);
    moe_h_.allocate(rows * c.hidden_size);
  }
  if (c.per_layer_input > 0) {
    ple_.allocate(rows * c.num_layers * c.per_layer_input);
    ple_proj_.allocate(rows * c.num_layers * c.per_layer_input);
    ple_gate_.allocate(rows * c.per_layer_input);
  }
  if (model.placement().kind == DeviceKind::cuda) {
#ifdef TANDEM_HAVE_CUDA
    auto backend = CudaForward::create(model, *model.device_weights(), kv, max_rows_);
    if (backend.ok()) {
      cuda_ = std::move(backend).value();
    } else {
      device_status_ = backend.status();
    }
#else
    device_status_ = failed_precondition("forward: this build has no CUDA");
#endif
  }
}

Forward::~Forward() = default;

Status Forward::warm_up() {
  TANDEM_RETURN_IF_ERROR(device_status_);
#ifdef TANDEM_HAVE_CUDA
  if (cuda_) return cuda_->warm_up(ctx_.gemm);
#endif
  return Status::Ok();
}

bool Forward::picked_on_device() const {
#ifdef TANDEM_HAVE_CUDA
  return cuda_ != nullptr && cuda_->device_picks();
#else
  return false;
#endif
}

int32_t ForwardOutput::argmax_row(int64_t r) const {
  if (!picks.empty() && picks[r] >= 0) return picks[r];
  return kernels::argmax(logits_row(r), vocab);
}

Status Forward::run_chunk_on_device(int64_t r0, int64_t r1, const ForwardOptions& options, bool adopt,
                                    bool chain) {
#ifdef TANDEM_HAVE_CUDA
  const int64_t hs = model_.config().hidden_size;
  ChunkRows in;
  in.rows = r1 - r0;
  in.tokens = tokens_.data() + r0;
  in.positions = positions_.data() + r0;
  in.rope_positions = rope_positions_.data() + r0;
  in.tables = tables_.data() + r0;
  in.embed_rows = embed_rows_.data() + r0;
  in.wants_output = wants_output_.data() + r0;
  ChunkOutputs out;
  out.logits = logits_base_ + out_rows_ * model_.config().vocab_size;
  if (options.picks_only && picked_on_device()) {
    out.picks = picks_.data() + out_rows_;
    if (!options.pick_rules.empty()) out.rules = options.pick_rules.data() + out_rows_;
  }
  if (options.hidden != HiddenOutput::none) {
    out.hidden = out_hidden_.data() + out_rows_ * hs;
    out.hidden_all = out_hidden_.data() + r0 * hs;
  }
  ChainedStep next;
  if (chain) {  // the same rows one position on (plan_chain)
    next.rows = in;
    next.rows.tokens = next_tokens_.data();
    next.rows.positions = next_positions_.data();
    next.rows.rope_positions = next_rope_.data();
    next.rows.wants_output = next_wants_.data();
    next.rules = next_rules_.empty() ? nullptr : next_rules_.data();
  }
  auto k = adopt ? cuda_->collect_chained(out, chain ? &next : nullptr)
                 : cuda_->run_chunk(in, options, out, ctx_.gemm, chain ? &next : nullptr);
  if (!k.ok()) return k.status();
  out_rows_ += *k;
  return Status::Ok();
#else
  return failed_precondition("forward: this build has no CUDA");
#endif
}

Status Forward::validate_and_reserve(std::span<const SequenceStep> steps) {
  const int64_t vocab = model_.config().vocab_size;
  if (steps.empty()) return invalid_argument("forward: empty batch");
  int64_t total_new_blocks = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SequenceStep& s = steps[i];
    const std::string where = "forward: step " + std::to_string(i) + ": ";
    if (!kv_.valid(s.seq)) return invalid_argument(where + "unknown KV sequence " + std::to_string(s.seq));
    for (size_t j = 0; j < i; ++j) {
      if (steps[j].seq == s.seq) return invalid_argument(where + "sequence appears twice in one batch");
    }
    if (s.tokens.empty()) return invalid_argument(where + "no tokens");
    if (!s.embeddings.empty() &&
        s.embeddings.size() != s.tokens.size() * static_cast<size_t>(model_.config().hidden_size))
      return invalid_argument(where + "embeddings must hold tokens x hidden_size floats");
    if (s.start_position != kv_.length(s.seq))
      return invalid_argument(where + "start position " + std::to_string(s.start_position) +
                              " != KV length " + std::to_string(kv_.length(s.seq)) +
                              " (truncate the sequence first to re-run positions)");
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= vocab)
        return invalid_argument(where + "token id " + std::to_string(t) + " outside [0, " +
                                std::to_string(vocab) + ")");
    }
    total_new_blocks += kv_.blocks_needed(s.seq, s.start_position + static_cast<int64_t>(s.tokens.size()));
  }
  kv_.make_room(static_cast<int32_t>(total_new_blocks));
  if (total_new_blocks > kv_.free_blocks())
    return resource_exhausted("KV cache: batch does not fit (needs " + std::to_string(total_new_blocks) +
                              " more blocks, " + std::to_string(kv_.free_blocks()) + " of " +
                              std::to_string(kv_.num_blocks()) + " free)");
  for (const SequenceStep& s : steps) {
    TANDEM_RETURN_IF_ERROR(kv_.reserve(s.seq, s.start_position + static_cast<int64_t>(s.tokens.size())));
  }
  return Status::Ok();
}

Expected<ForwardOutput> Forward::run(std::span<const SequenceStep> steps, const ForwardOptions& options) {
  TANDEM_RETURN_IF_ERROR(device_status_);
  // The step queued ahead is either exactly this one, or dropped before anything else (ADR 0090).
  const bool adopt = chained_matches(steps, options);
#ifdef TANDEM_HAVE_CUDA
  if (!adopt && cuda_ != nullptr && cuda_->chained_pending()) {
    ++chained_dropped_;
    TANDEM_RETURN_IF_ERROR(cuda_->discard_chained());
  }
#endif
  if (adopt) ++chained_taken_;
  if (!adopt) chained_.clear();
  TANDEM_RETURN_IF_ERROR(validate_and_reserve(steps));
  const ModelConfig& c = model_.config();
  ForwardOutput out;
  out.vocab = c.vocab_size;
  out.hidden_size = c.hidden_size;
  out.first_row.reserve(steps.size());

  // Flatten the batch into rows.
  tokens_.clear();
  positions_.clear();
  rope_positions_.clear();
  tables_.clear();
  wants_output_.clear();
  embed_rows_.clear();
  int64_t out_rows = 0;
  for (const SequenceStep& s : steps) {
    out.first_row.push_back(out_rows);
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    const int32_t* table = kv_.block_table(s.seq);
    for (int64_t j = 0; j < n; ++j) {
      const bool want = s.logits == LogitRows::all || (s.logits == LogitRows::last && j == n - 1);
      tokens_.push_back(s.tokens[j]);
      positions_.push_back(static_cast<int32_t>(s.start_position + j));
      rope_positions_.push_back(static_cast<int32_t>(s.start_position + j) + s.rope_offset);
      tables_.push_back(table);
      embed_rows_.push_back(s.embeddings.empty() ? nullptr : s.embeddings.data() + j * c.hidden_size);
      wants_output_.push_back(want ? 1 : 0);
      out_rows += want ? 1 : 0;
    }
  }
  const size_t logit_floats = static_cast<size_t>(out_rows * c.vocab_size);
  if (options.picks_only && !options.pick_rules.empty() &&
      options.pick_rules.size() != static_cast<size_t>(out_rows))
    return invalid_argument("Forward::run: " + std::to_string(options.pick_rules.size()) +
                            " pick rules for " + std::to_string(out_rows) + " output rows");
#ifdef TANDEM_HAVE_CUDA
  if (cuda_) {  // the device downloads into page-locked memory it owns
    auto host = cuda_->host_logits(logit_floats);
    if (!host.ok()) return host.status();
    logits_base_ = *host;
  }
#endif
  if (!cuda_) {
    if (out_logits_.size() < logit_floats) out_logits_.allocate(logit_floats);
    logits_base_ = out_logits_.data();
  }
  const int64_t rows = static_cast<int64_t>(tokens_.size());
  const bool all_rows = options.hidden_all_rows && options.hidden == HiddenOutput::after_final_norm;
  const int64_t hidden_rows = all_rows ? rows : out_rows;
  if (options.hidden != HiddenOutput::none &&
      out_hidden_.size() < static_cast<size_t>(hidden_rows * c.hidden_size))
    out_hidden_.allocate(static_cast<size_t>(hidden_rows * c.hidden_size));

  out_rows_ = 0;
  if (options.picks_only) picks_.assign(static_cast<size_t>(out_rows), -1);
  const bool chain = plan_chain(steps, options);  // one chunk then
  chained_.clear();
  for (int64_t r0 = 0; r0 < rows; r0 += max_rows_) {
    const int64_t r1 = std::min(rows, r0 + max_rows_);
    if (cuda_) {
      TANDEM_RETURN_IF_ERROR(run_chunk_on_device(r0, r1, options, adopt, chain));
    } else {
      run_chunk(r0, r1, options);
    }
  }
  TANDEM_CHECK(out_rows_ == out_rows);
  if (options.picks_only && !picked_on_device()) {  // from the rows, spread over the pool
    // Sampled rules and rows the caller needs stay -1: the caller picks those (ADR 0072).
    auto pick = [&](int64_t begin, int64_t end, int) {
      for (int64_t r = begin; r < end; ++r)
        if (options.pick_rules.empty() ||
            (!(options.pick_rules[r].temperature > 0.0f) && options.pick_rules[r].needs_row == 0))
          picks_[r] = kernels::greedy_pick(logits_base_ + r * c.vocab_size, c.vocab_size);
    };
    if (ctx_.pool != nullptr) {
      ctx_.pool->parallel_for(out_rows, 1, pick);
    } else {
      pick(0, out_rows, 0);
    }
  }

  for (const SequenceStep& s : steps)
    kv_.set_length(s.seq, s.start_position + static_cast<int64_t>(s.tokens.size()));
  if (chain) remember_chain(steps);
  out.rows = out_rows;
  out.logits = std::span<const float>(logits_base_, logit_floats);
  if (options.picks_only) out.picks = std::span<const int32_t>(picks_.data(), picks_.size());
  if (options.hidden != HiddenOutput::none)
    out.hidden = std::span<const float>(out_hidden_.data(), static_cast<size_t>(hidden_rows * c.hidden_size));
  return out;
}

void Forward::run_chunk(int64_t r0, int64_t r1, const ForwardOptions& options) {
  const bool all_rows = options.hidden_all_rows && options.hidden == HiddenOutput::after_final_norm;
  const HiddenOutput hidden = all_rows ? HiddenOutput::none : options.hidden;
  const ModelConfig& c = model_.config();
  const int64_t m = r1 - r0;
  const int64_t hs = c.hidden_size;
  kernels::embedding(ctx_, model_.embedding(), model_.embedding_dtype(), hs, tokens_.data() + r0, m,
                     x_.data());
  if (const float scale = model_.embed_scale(); scale != 1.0f)
    for (int64_t i = 0; i < m * hs; ++i) x_.data()[i] *= scale;
  for (int64_t r = 0; r < m; ++r)
    if (embed_rows_[r0 + r]) std::memcpy(x_.data() + r * hs, embed_rows_[r0 + r], sizeof(float) * hs);
  if (c.per_layer_input > 0) per_layer_inputs(r0, m);
  for (int l = 0; l < c.num_layers; ++l) run_layer(l, r0, m);
  if (all_rows) {
    // Row-wise, so each row's bits equal the gathered path's below.
    kernels::rmsnorm(ctx_, x_.data(), model_.final_norm().data(), out_hidden_.data() + r0 * hs, m, hs,
                     c.rms_norm_eps);
  }

  // Rows that produce output: final norm, optional hidden copy, LM head.
  int64_t k = 0;
  for (int64_t r = 0; r < m; ++r) {
    if (!wants_output_[r0 + r]) continue;
    std::memcpy(gather_.data() + k * hs, x_.data() + r * hs, sizeof(float) * hs);
    ++k;
  }
  if (k == 0) return;
  auto copy_hidden = [&] {
    std::memcpy(out_hidden_.data() + out_rows_ * hs, gather_.data(), sizeof(float) * k * hs);
  };
  if (hidden == HiddenOutput::before_final_norm) copy_hidden();
  kernels::rmsnorm(ctx_, gather_.data(), model_.final_norm().data(), gather_.data(), k, hs, c.rms_norm_eps);
  if (hidden == HiddenOutput::after_final_norm) copy_hidden();
  float* logits = out_logits_.data() + out_rows_ * c.vocab_size;
  kernels::matmul(ctx_, gather_.data(), k, model_.lm_head(), logits);
  if (const float cap = c.final_softcap; cap > 0.0f)  // gemma2: tanh(l / cap) * cap, as transformers
    for (int64_t i = 0; i < k * c.vocab_size; ++i) logits[i] = std::tanh(logits[i] / cap) * cap;
  out_rows_ += k;
}

void Forward::run_layer(int layer, int64_t r0, int64_t m) {
  attention_block(layer, r0, m);
  mlp_block(layer, m);
  if (model_.config().layer_scalar) per_layer_block(layer, m);
}

void Forward::attention_block(int layer, int64_t r0, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  // This layer's shapes; a KV-shared layer (gemma4) projects only q and reads
  // its source layer's pool; with attention_k_eq_v V is the k projection.
  const int hd = c.layer_head_dim(layer), kv_heads = c.layer_kv_heads(layer);
  const bool own_kv = c.kv_source(layer) == layer, k_is_v = c.k_eq_v(layer);
  const int64_t hs = c.hidden_size, qd = c.layer_q_dim(layer), kvd = c.layer_kv_dim(layer);
  const int64_t qkv_n = qd + (own_kv ? (k_is_v ? kvd : 2 * kvd) : 0);
  kernels::rmsnorm(ctx_, x_.data(), w.attn_norm.data(), h_.data(), m, hs, c.rms_norm_eps);
  kernels::matmul(ctx_, h_.data(), m, w.qkv, qkv_.data());
  if (!w.qkv_bias.empty()) kernels::add_bias(ctx_, qkv_.data(), w.qkv_bias.data(), m, qkv_n);
  for (int64_t r = 0; r < m; ++r) {
    const float* row = qkv_.data() + r * qkv_n;
    std::memcpy(q_.data() + r * qd, row, sizeof(float) * qd);
    if (!own_kv) continue;
    std::memcpy(k_.data() + r * kvd, row + qd, sizeof(float) * kvd);
    std::memcpy(v_.data() + r * kvd, row + qd + (k_is_v ? 0 : kvd), sizeof(float) * kvd);
  }
  if (!w.q_norm.empty())
    kernels::rmsnorm(ctx_, q_.data(), w.q_norm.data(), q_.data(), m * c.num_heads, hd, c.rms_norm_eps);
  if (own_kv && !w.k_norm.empty())
    kernels::rmsnorm(ctx_, k_.data(), w.k_norm.data(), k_.data(), m * kv_heads, hd, c.rms_norm_eps);
  if (own_kv && c.v_norm)  // gemma4: RMSNorm without a weight
    kernels::rmsnorm(ctx_, v_.data(), ones_.data(), v_.data(), m * kv_heads, hd, c.rms_norm_eps);
  const int32_t* pos = positions_.data() + r0;
  const int32_t* rope_pos = rope_positions_.data() + r0;
  const float* inv_freq = model_.rope_inv_freq(layer).data();
  kernels::rope(ctx_, q_.data(), m, c.num_heads, hd, rope_pos, inv_freq, hd, kernels::RopeLayout::neox);
  if (own_kv)
    kernels::rope(ctx_, k_.data(), m, kv_heads, hd, rope_pos, inv_freq, hd, kernels::RopeLayout::neox);

  // New K/V first, then attention over the pool (which now holds them).
  const kernels::KvPool pool = kv_.layer_pool(layer);
  const int32_t* const* tables = tables_.data() + r0;
  if (own_kv) kernels::kv_write(pool, k_.data(), v_.data(), m, pos, tables);
  const float scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  kernels::attention(ctx_, q_.data(), m, c.num_heads, pool, pos, tables, scale, c.layer_window[layer],
                     attn_.data(), c.attn_softcap);

  kernels::matmul(ctx_, attn_.data(), m, w.o, h_.data());
  if (!w.o_bias.empty()) kernels::add_bias(ctx_, h_.data(), w.o_bias.data(), m, hs);
  if (!w.post_attn_norm.empty())
    kernels::rmsnorm(ctx_, h_.data(), w.post_attn_norm.data(), h_.data(), m, hs, c.rms_norm_eps);
  kernels::add_inplace(ctx_, x_.data(), h_.data(), m * hs);
}

void Forward::mlp_block(int layer, int64_t m) {
  const ModelConfig& c = model_.config();
  const LayerWeights& w = model_.layers()[layer];
  const int64_t hs = c.hidden_size, inter = c.layer_ffn(layer);
  if (c.sparse(layer)) return moe_block(layer, m);
  kernels::rmsnorm(ctx_, x_.data(), w.mlp_norm.data(), h_.data(), m, hs, c.rms_norm_eps);
  kernels::matmul(ctx_, h_.data(), m, w.gate_up, gate_up_.data());
  if (!w.gate_up_bias.empty()) kernels::add_bias(ctx_, gate_up_.data(), w.gate_up_bias.data(), m, 2 * inter);
  for (int64_t r = 0; r < m; ++r) {
    const float* row = gate_up_.data() + r * 2 * inter;
    if (c.mlp_activation == Activation::gelu_tanh)
      kernels::gelu_tanh_gate(ctx_, row, row + inter, act_.data() + r * inter, inter);
    else
      kernels::swiglu(ctx_, row, row + inter, act_.data() + r * inter, inter);
  }
  kernels::matmul(ctx_, act_.data(), m, w.down, h_.data());
  if (!w.down_bias.empty()) kernels::add_bias(ctx_, h_.data(), w.down_bias.data(), m, hs);
  if (c.moe_beside_mlp) {
    // gemma4: norm(mlp) + norm(experts), then the shared post-feedforward norm.
    kernels::rmsnorm(ctx_, h_.data(), w.post_mlp_dense_norm.data(), h_.data(), m, hs, c.rms_norm_eps);
    gemma4_moe(layer, m);
    kernels::add_inplace(ctx_, h_.data(), moe_x_.data(), m * hs);
  }
  if (!w.post_mlp_norm.empty())
    kernels::rmsnorm(ctx_, h_.data(), w.post_mlp_norm.data(), h_.data(), m, hs, c.rms_norm_eps);
  kernels::add_inplace(ctx_, x_.data(), h_.data(), m * hs);
}

}  // namespace tandem::model
