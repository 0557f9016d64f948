// cuda_forward.cpp — one chunk of the forward on a CUDA device (cuda_forward.h).
// The op sequence mirrors forward.cpp's run_chunk / attention_block /
// mlp_block; activations stay f32 between ops, GEMM inputs are rounded to bf16
// (ADR 0054, the default) or split into two bf16 terms (TANDEM_CUDA_ACTIVATIONS=f32,
// ADR 0006: a GPU row then tracks the CPU f32 path to ~1e-5) against bf16 weights
// (f16 / f32 weights: sums of bf16 terms, ADR 0083).
#include "cuda_forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/log.h"
#include "kernels/bf16_terms.h"
#include "model/model.h"

namespace tandem::model {
namespace {

namespace gpu = kernels::gpu;
using kernels::DType;

using cuda_forward_detail::alloc;
using cuda_forward_detail::bf16;
using cuda_forward_detail::f32;

}  // namespace

Expected<std::unique_ptr<CudaForward>> CudaForward::create(const Model& model, const DeviceWeights& weights,
                                                           const KvCache& kv, int64_t max_rows) {
  TANDEM_RETURN_IF_ERROR(gpu::set_device(weights.device));
  std::unique_ptr<CudaForward> f(new CudaForward(model, weights));
  const ModelConfig& c = model.config();
  f->max_rows_ = max_rows;
  const char* fuse = std::getenv("TANDEM_CUDA_FUSE");  // 0: the unfused glue (same bits; for comparison)
  f->fuse_ = fuse == nullptr || std::string(fuse) != "0";
  // 0: the residual adds without the RMSNorm after them (same bits; for comparison).
  const char* fuse_norm = std::getenv("TANDEM_CUDA_FUSE_NORM");
  f->fuse_norm_ = fuse_norm == nullptr || std::string(fuse_norm) != "0";
  // 0: attention's output and the final norm take their own passes again (same bits; ADR 0056).
  const char* fuse_launches = std::getenv("TANDEM_CUDA_FUSE_LAUNCHES");
  f->fuse_launches_ = fuse_launches == nullptr || std::string(fuse_launches) != "0";
  // 0: a step's q/k/v (RoPE, the K/V write) take their own launch before attention (ADR 0073).
  // TANDEM_CUDA_FUSE_ROPE_ROWS=N: calls of up to N rows fuse them (default 1:
  // one-row steps, ADR 0073; up to kAttentionTileMinRows with ADR 0081's news:
  // the same bits, but slower on the 8B verify blocks, so not the default).
  const char* fuse_rope = std::getenv("TANDEM_CUDA_FUSE_ROPE");
  const char* fuse_rope_rows = std::getenv("TANDEM_CUDA_FUSE_ROPE_ROWS");
  f->fuse_rope_rows_ = 1;
  if (fuse_rope_rows != nullptr && *fuse_rope_rows != '\0')
    f->fuse_rope_rows_ = std::clamp<int64_t>(std::atoll(fuse_rope_rows), 0, gpu::kAttentionTileMinRows);
  if (fuse_rope != nullptr && std::string(fuse_rope) == "0") f->fuse_rope_rows_ = 0;
  // TANDEM_CUDA_NORM_EPILOGUE_ROWS=N (0..8, default 0 until measured): calls of up to N rows take the o and
  // down projections' residual add + RMSNorm in the GEMM's last block (ADR 0089; same bits); 0: never.
  const char* norm_rows = std::getenv("TANDEM_CUDA_NORM_EPILOGUE_ROWS");
  if (norm_rows != nullptr && *norm_rows != '\0')
    f->norm_epilogue_rows_ = std::clamp<int64_t>(std::atoll(norm_rows), 0, gpu::kResidualNormMaxRows);
  // 0: the picks go to a device buffer and a copy brings them to the host, as before.
  const char* picks_to_host = std::getenv("TANDEM_CUDA_PICKS_TO_HOST");
  f->picks_to_host_ = picks_to_host == nullptr || std::string(picks_to_host) != "0";
  // 0: never queue a decode step behind the one the host waits for (ADR 0090; same bits).
  const char* chain = std::getenv("TANDEM_CUDA_CHAIN");
  f->chain_ = chain == nullptr || std::string(chain) != "0";
  // 0: a graphed step's row inputs go up by a DMA before it, not by its first kernel (ADR 0090; same bits).
  const char* stage = std::getenv("TANDEM_CUDA_STAGE_INPUTS");
  f->stage_inputs_ = stage == nullptr || std::string(stage) != "0";
  // GEMM inputs: bf16 (rounded once, one mma per k-step; the default, ADR 0054) or f32
  // (hi + lo split, ADR 0006). Both are batch invariant; an unknown value is an error.
  auto activations = cuda_activations();
  if (!activations.ok()) return activations.status();
  f->bf16_x_ = *activations == "bf16";
  // pool: every graphed step's tables as long as the pool (before ADR 0047; same bits, for comparison).
  // 0: greedy picks from the downloaded rows on the host (same picks; for comparison, ADR 0070).
  const char* device_pick = std::getenv("TANDEM_CUDA_DEVICE_PICK");
  f->device_pick_ = device_pick == nullptr || std::string(device_pick) != "0";
  // 0: a graphed step's pick and its copy are queued after the graph, not inside it (same picks).
  const char* graph_pick = std::getenv("TANDEM_CUDA_GRAPH_PICK");
  f->graph_pick_ = graph_pick == nullptr || std::string(graph_pick) != "0";
  const char* stride = std::getenv("TANDEM_CUDA_GRAPH_STRIDE");
  f->graph_stride_pool_ = stride != nullptr && std::string(stride) == "pool";
  f->max_table_ = kv.num_blocks();
  auto stream = gpu::Stream::create();
  if (!stream.ok()) return stream.status();
  f->stream_ = std::move(stream).value();
  f->geometry_.tokens_per_block = kv.tokens_per_block();
  f->geometry_.n_kv_heads = c.num_kv_heads;
  f->geometry_.head_dim = c.head_dim;
  f->k_pool_.resize(c.num_layers);
  f->v_pool_.resize(c.num_layers);
  // Per layer (gemma4: its own kv heads x head_dim; a KV-shared layer has none and reads its source's).
  size_t q_max = 0, kv_max = 0, ffn_max = 0;
  int head_max = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    q_max = std::max<size_t>(q_max, c.layer_q_dim(l));
    kv_max = std::max<size_t>(kv_max, c.layer_kv_dim(l));
    ffn_max = std::max<size_t>(ffn_max, c.layer_ffn(l));
    head_max = std::max(head_max, c.layer_head_dim(l));
    if (c.kv_source(l) != l) continue;
    const size_t pool_floats =
        static_cast<size_t>(kv.num_blocks()) * kv.tokens_per_block() * c.layer_kv_dim(l);
    TANDEM_RETURN_IF_ERROR(alloc(f->k_pool_[l], pool_floats * sizeof(float)));
    TANDEM_RETURN_IF_ERROR(alloc(f->v_pool_[l], pool_floats * sizeof(float)));
  }
  const size_t rows = static_cast<size_t>(max_rows), fl = sizeof(float);
  const size_t hs = c.hidden_size, qd = q_max, kvd = kv_max, inter = ffn_max;
  TANDEM_RETURN_IF_ERROR(alloc(f->x_, rows * hs * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->h_, rows * hs * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->gather_, rows * hs * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->qkv_, rows * (qd + 2 * kvd) * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->q_, rows * qd * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->k_, rows * kvd * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->v_, rows * kvd * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->attn_, rows * qd * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->gate_up_, rows * 2 * inter * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->act_, rows * inter * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->logits_, rows * static_cast<size_t>(c.vocab_size) * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->d_picks_, 2 * rows * sizeof(int32_t)));
  TANDEM_RETURN_IF_ERROR(alloc(f->logits_alt_, static_cast<size_t>(std::min(max_rows, kGraphMaxRows)) *
                                                   static_cast<size_t>(c.vocab_size) * fl));
  for (gpu::Event& e : f->done_) {
    auto event = gpu::Event::create();
    if (!event.ok()) return event.status();
    e = std::move(event).value();
  }
  TANDEM_RETURN_IF_ERROR(alloc(f->norm_ticket_, sizeof(uint32_t)));
  TANDEM_RETURN_IF_ERROR(f->norm_ticket_.fill_bytes(0, f->stream_));
  {
    const int64_t pairs = max_rows * gpu::pick_slices(c.vocab_size, /*rules=*/true);
    TANDEM_RETURN_IF_ERROR(alloc(f->pick_best_, static_cast<size_t>(pairs) * sizeof(double)));
    TANDEM_RETURN_IF_ERROR(alloc(f->pick_index_, static_cast<size_t>(pairs) * sizeof(int32_t)));
    TANDEM_RETURN_IF_ERROR(alloc(f->pick_counters_, rows * sizeof(uint32_t)));
    TANDEM_RETURN_IF_ERROR(f->pick_counters_.fill_bytes(0, f->stream_));
    f->pick_workspace_ = gpu::PickWorkspace{f->pick_best_.as<double>(), f->pick_index_.as<int32_t>(),
                                            f->pick_counters_.as<uint32_t>(), pairs, max_rows};
    TANDEM_RETURN_IF_ERROR(alloc(f->d_rules_, rows * sizeof(kernels::PickRule)));
  }
  {
    auto picks = gpu::PinnedBuffer::allocate(2 * rows * sizeof(int32_t), /*mapped=*/true);
    if (!picks.ok()) return picks.status();
    f->host_picks_ = std::move(picks).value();
  }
  // The K-sliced GEMM's partial sums: the largest slices * rows * n of the model's matrices.
  size_t slab_floats = 0;
  const int64_t shapes[][2] = {{static_cast<int64_t>(qd + 2 * kvd), static_cast<int64_t>(hs)},
                               {static_cast<int64_t>(hs), static_cast<int64_t>(qd)},
                               {static_cast<int64_t>(2 * inter), static_cast<int64_t>(hs)},
                               {static_cast<int64_t>(hs), static_cast<int64_t>(inter)},
                               {c.vocab_size, static_cast<int64_t>(hs)}};
  for (const auto& nk : shapes) {
    for (int terms = 0; terms <= weights.max_terms; ++terms) {  // and as split weights (ADR 0083)
      const gpu::GemmSlicing plan =
          gpu::gemm_slicing(nk[0], terms > 0 ? kernels::bf16_terms_k(nk[1], terms) : nk[1]);
      if (plan.slices > 1)
        slab_floats = std::max(slab_floats, plan.slices * rows * static_cast<size_t>(nk[0]));
    }
  }
  if (slab_floats > 0) TANDEM_RETURN_IF_ERROR(alloc(f->slices_, slab_floats * fl));
  TANDEM_RETURN_IF_ERROR(f->allocate_family_scratch());
  if (weights.any_quantized()) {  // the widest quantized GEMM input of a chunk, as int8 blocks
    const size_t widest = std::max({hs, qd, inter, static_cast<size_t>(c.moe.expert_intermediate),
                                    static_cast<size_t>(c.moe.shared_intermediate)});
    TANDEM_RETURN_IF_ERROR(alloc(f->act_blocks_, gpu::quant_act_bytes(max_rows, widest)));
  }
  // Before any graph capture: the widest GEMM input of a chunk (a split weight's: terms · k).
  const size_t widest_split = static_cast<size_t>(weights.widest_split_k);
  if (f->bf16_x_)
    TANDEM_RETURN_IF_ERROR(
        alloc(f->x_bf16_, rows * std::max({hs, qd, inter, widest_split}) * sizeof(uint16_t)));
  if (widest_split > 0) TANDEM_RETURN_IF_ERROR(alloc(f->x_rep_, rows * widest_split * fl));
  // Split attention's partials for every row of a chunk, or (a long pool) for
  // the decode/verify steps only; bigger calls then take the serial shape,
  // which gives the same bits (ADR 0028). Window 0 bounds every layer.
  int64_t attn_rows = max_rows;
  constexpr size_t kAttentionPartialCap = size_t{64} << 20;  // floats (256 MiB)
  gpu::DeviceKvPool widest = f->geometry_;                   // the widest layer's heads size the partials
  widest.head_dim = head_max;
  if (gpu::attention_partial_floats(attn_rows, c.num_heads, widest, f->max_table_, 0) > kAttentionPartialCap)
    attn_rows = std::min<int64_t>(max_rows, kGraphMaxRows);
  const size_t partials = gpu::attention_partial_floats(attn_rows, c.num_heads, widest, f->max_table_, 0);
  const size_t counters = static_cast<size_t>(max_rows) * c.num_heads;
  TANDEM_RETURN_IF_ERROR(alloc(f->attn_partials_, partials * fl));
  TANDEM_RETURN_IF_ERROR(alloc(f->attn_counters_, counters * sizeof(uint32_t)));
  TANDEM_RETURN_IF_ERROR(f->attn_counters_.fill_bytes(0, f->stream_));
  f->attn_workspace_ = gpu::AttentionWorkspace{f->attn_partials_.as<float>(), partials,
                                               f->attn_counters_.as<uint32_t>(), counters};
  if (f->stage_inputs_) {
    const size_t ints = 5 * rows + static_cast<size_t>(std::min(max_rows, kGraphMaxRows) * f->max_table_);
    f->graph_rules_offset_ = (ints * sizeof(int32_t) + 15) / 16 * 16;
    for (gpu::PinnedBuffer& b : f->graph_staging_) {
      auto staging = gpu::PinnedBuffer::allocate(f->graph_rules_offset_ + rows * sizeof(kernels::PickRule),
                                                 /*mapped=*/true);
      if (!staging.ok()) return staging.status();
      b = std::move(staging).value();
    }
  }
  const size_t inputs = rows * (5 + static_cast<size_t>(f->max_table_));
  TANDEM_RETURN_IF_ERROR(alloc(f->row_inputs_, inputs * sizeof(int32_t)));
  int32_t* base = f->row_inputs_.as<int32_t>();
  f->d_tokens_ = base;
  f->token_ids_ = base;
  f->d_positions_ = base + rows;
  f->d_rope_ = base + 2 * rows;
  f->d_out_index_ = base + 3 * rows;
  f->d_news_ = base + 4 * rows;
  f->d_tables_ = base + 5 * rows;
  return f;
}

int64_t CudaForward::graph_stride(int64_t needed) const {
  if (graph_stride_pool_) return max_table_;
  int64_t stride = kGraphMinStride;
  while (stride < needed) stride *= 2;
  return std::min(stride, max_table_);
}

Status CudaForward::upload_rows(const ChunkRows& in, int parity, int64_t* out_rows, int64_t* table_stride,
                                bool graphed) {
  const int64_t m = in.rows, tpb = geometry_.tokens_per_block;
  int64_t stride = 1;
  for (int64_t r = 0; r < m; ++r) stride = std::max<int64_t>(stride, in.positions[r] / tpb + 1);
  // A captured graph bakes the stride in (and with it the attention grid):
  // graphed steps round it up to a bucket, the graph's key (ADR 0047).
  if (graphed) stride = graph_stride(stride);
  // Layout as allocated: [tokens | positions | rope | out index | news] each max_rows, then tables.
  // Page-locked, so that the row inputs go up as one queued DMA and the host goes on to launch
  // the step (from pageable memory the driver copies through its bounce buffer and the call
  // waits); grown on demand, with room for the step's pick rules after the rows. A parity's
  // last copy out is done when the host next fills it: every run_chunk ends in a wait for its
  // step (a stream synchronisation after a failure), and the chained steps alternate parities.
  const size_t count = static_cast<size_t>(5 * max_rows_ + m * stride);
  // A graphed step's first kernel copies them from the mapped staging (enqueue_plain): no DMA.
  const bool staged = graphed && stage_inputs_;
  gpu::PinnedBuffer& staging = staged ? graph_staging_[parity] : staging_[parity];
  TANDEM_CHECK(!staged || count * sizeof(int32_t) <= graph_rules_offset_);
  const size_t need = count * sizeof(int32_t) + static_cast<size_t>(max_rows_) * sizeof(kernels::PickRule);
  if (!staged && staging.bytes() < need) {
    size_t bytes = 4096;
    while (bytes < need) bytes *= 2;
    auto grown = gpu::PinnedBuffer::allocate(bytes);
    if (!grown.ok()) return grown.status();
    staging = std::move(grown).value();
  }
  int32_t* s = staging.as<int32_t>();
  std::fill(s, s + count, 0);
  int64_t k = 0;
  for (int64_t r = 0; r < m; ++r) {
    s[r] = in.tokens[r];
    s[max_rows_ + r] = in.positions[r];
    s[2 * max_rows_ + r] = in.rope_positions[r];
    if (in.wants_output[r]) s[3 * max_rows_ + k++] = static_cast<int32_t>(r);
    std::memcpy(s + 5 * max_rows_ + r * stride, in.tables[r],
                sizeof(int32_t) * static_cast<size_t>(in.positions[r] / tpb + 1));
  }
  // Rows of one sequence share a table pointer and are contiguous (a sequence
  // is in a batch once), at consecutive positions: news (ADR 0081) counts the
  // rows before each of its sequence. Same bits whatever the segmentation (ADR 0043).
  attn_segments_.clear();
  // news is read by attention_from_qkv, which takes multi-row calls only under the knob.
  const bool reads_news = m > 1 && m <= fuse_rope_rows_;
  for (int64_t r = 0; r < m;) {
    int64_t e = r + 1;
    while (e < m && in.tables[e] == in.tables[r]) ++e;
    for (int64_t i = r; i < e; ++i) {
      if (reads_news && in.positions[i] != in.positions[r] + (i - r))
        return internal_error("cuda: the rows of one sequence are not at consecutive positions");
      s[4 * max_rows_ + i] = static_cast<int32_t>(i - r);
    }
    const bool tile = e - r > gpu::kAttentionTileMinRows;
    if (!tile && !attn_segments_.empty() && !attn_segments_.back().tile) {
      attn_segments_.back().count += e - r;
    } else {
      attn_segments_.push_back({r, e - r, tile});
    }
    r = e;
  }
  *out_rows = k;
  *table_stride = stride;
  if (staged) return Status::Ok();
  return row_inputs_.upload(s, count * sizeof(int32_t), stream_);
}

Status CudaForward::upload_rules(const kernels::PickRule* rules, int64_t k, int parity, bool graphed) {
  const size_t bytes = sizeof(kernels::PickRule) * static_cast<size_t>(k);
  // A graph with its picks inside copies them in its first kernel (enqueue_plain).
  if (graphed && stage_inputs_ && graph_pick_) {
    std::memcpy(graph_staging_[parity].as<uint8_t>() + graph_rules_offset_, rules, bytes);
    return Status::Ok();
  }
  // After the rows upload_rows staged (its size check left room for max_rows rules).
  auto* staged =
      reinterpret_cast<kernels::PickRule*>(staging_[parity].as<uint8_t>() + staging_[parity].bytes() -
                                           sizeof(kernels::PickRule) * static_cast<size_t>(max_rows_));
  std::memcpy(staged, rules, bytes);
  return d_rules_.upload(staged, bytes, stream_);
}

float* CudaForward::logits_at(int parity) const {
  return parity == 0 ? logits_.as<float>() : logits_alt_.as<float>();
}

Status CudaForward::gemm(const float* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
                         bool bf16_ready) {
  if (mode_ == kernels::GemmMode::invariant && bf16_x_) {
    if (!bf16_ready) TANDEM_RETURN_IF_ERROR(gpu::to_bf16(stream_, x, x_bf16_.as<uint16_t>(), m * k));
    return gpu::gemm_bf16w_sliced(stream_, x_bf16_.data(), DType::bf16, m, w, n, k, y, slices_.as<float>(),
                                  slices_.bytes() / sizeof(float));
  }
  if (mode_ == kernels::GemmMode::invariant)
    return gpu::gemm_bf16w_sliced(stream_, x, DType::f32, m, w, n, k, y, slices_.as<float>(),
                                  slices_.bytes() / sizeof(float));
  if (!cublas_) {
    auto opened = gpu::CublasGemm::open();
    if (!opened.ok()) return opened.status();
    cublas_ = std::make_unique<gpu::CublasGemm>(std::move(opened).value());
  }
  // The weights are relaid (ADR 0057): x relaid alike, so cuBLAS's plain
  // product over the padded k is x·Wᵀ.
  const int64_t kp = gpu::relaid_row_pitch(k);
  const size_t need = static_cast<size_t>(m * kp) * sizeof(uint16_t);
  if (x_bf16_.bytes() < need) TANDEM_RETURN_IF_ERROR(alloc(x_bf16_, need));
  TANDEM_RETURN_IF_ERROR(gpu::to_bf16_relaid(stream_, x, m, k, x_bf16_.as<uint16_t>()));
  return cublas_->gemm(stream_, x_bf16_.as<uint16_t>(), m, w, n, kp, y);
}

Status CudaForward::gemm(const float* x, int64_t m, const DeviceMatrix& w, int64_t n, int64_t k, float* y,
                         bool bf16_ready) {
  if (w.f32) return gpu::gemm_f32w(stream_, x, m, w.data.as<float>(), n, k, y, n);
  if (w.quantized()) return gemm_quantized(x, m, w, n, k, y);
  if (w.repeated) {
    auto repeated = split_input(x, m, k, w.terms);
    if (!repeated.ok()) return repeated.status();
    return gemm(*repeated, m, w.data.as<uint16_t>(), n, kernels::bf16_terms_k(k, w.terms), y);
  }
  return gemm(x, m, w.data.as<uint16_t>(), n, k, y, bf16_ready);
}

// Split weights (ADR 0083): x [m][k] repeated `terms` times per row, each copy
// zero-padded to a multiple of 8: the input over k' = kernels::bf16_terms_k(k,
// terms) (x_rep_ holds the widest, sized at create).
Expected<const float*> CudaForward::split_input(const float* x, int64_t m, int64_t k, int terms) {
  if (static_cast<size_t>(m * kernels::bf16_terms_k(k, terms)) * sizeof(float) > x_rep_.bytes())
    return internal_error("cuda: a split-weight GEMM's input outgrows its buffer");
  TANDEM_RETURN_IF_ERROR(
      gpu::repeat_cols(stream_, x, m, k, terms, kernels::bf16_terms_k(k, 1), x_rep_.as<float>()));
  return static_cast<const float*>(x_rep_.as<float>());
}

Expected<gpu::GemmPartials> CudaForward::gemm_partials(const float* x, int64_t m, const DeviceMatrix& w,
                                                       int64_t n, int64_t k, float* y, bool bf16_ready) {
  if (w.repeated) {
    auto repeated = split_input(x, m, k, w.terms);
    if (!repeated.ok()) return repeated.status();
    return gemm_partials(*repeated, m, w.data.as<uint16_t>(), n, kernels::bf16_terms_k(k, w.terms), y);
  }
  if (!w.quantized() && !w.f32) return gemm_partials(x, m, w.data.as<uint16_t>(), n, k, y, bf16_ready);
  TANDEM_RETURN_IF_ERROR(gemm(x, m, w, n, k, y, bf16_ready));
  return gpu::GemmPartials{y, 1, m, n};
}

// The f32 rows x are always there (the epilogues write the bf16 copy next to
// them); the int8 blocks are the CPU's rule (ADR 0077), in any GEMM mode. Up
// to quant_fused_max_rows() rows (decode, verify) each GEMM quantizes them itself.
Status CudaForward::gemm_quantized(const float* x, int64_t m, const DeviceMatrix& w, int64_t n, int64_t k,
                                   float* y) {
  if (m > gpu::quant_fused_max_rows()) {
    if (gpu::quant_act_bytes(m, k) > act_blocks_.bytes())
      return internal_error("cuda: the quantized GEMM's input blocks outgrow their buffer");
    TANDEM_RETURN_IF_ERROR(gpu::quantize_act_rows(stream_, x, m, k, act_blocks_.data()));
  }
  for (const DeviceMatrix::Part& part : w.parts) {
    TANDEM_RETURN_IF_ERROR(gpu::gemm_quant(stream_, x, act_blocks_.data(), m,
                                           w.data.as<uint8_t>() + part.offset, part.dtype, part.n, k,
                                           y + part.column, n));
  }
  return Status::Ok();
}

Status CudaForward::embed(int64_t m) {
  const int64_t hs = model_.config().hidden_size;
  if (w_.embedding_f32 != nullptr)
    return gpu::gather_rows(stream_, w_.embedding_f32, token_ids_, m, hs, x_.as<float>());
  return gpu::embedding_bf16(stream_, w_.embedding, hs, token_ids_, m, x_.as<float>());
}

Status CudaForward::attention(const float* q, int64_t m, const gpu::DeviceKvPool& pool, int64_t table_stride,
                              int window, float* out, uint16_t* out_bf16) {
  const ModelConfig& c = model_.config();
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // Up to kAttentionTileMinRows rows (decode and verify steps, the captured
  // graphs) one call of the automatic shape, which is split.
  if (m <= gpu::kAttentionTileMinRows)
    return gpu::attention(stream_, q, m, c.num_heads, pool, d_positions_, d_tables_, table_stride, scale,
                          window, out, attn_workspace_, 0.0f, gpu::AttentionShape::automatic, out_bf16);
  const int64_t width = static_cast<int64_t>(c.num_heads) * c.head_dim;
  for (const AttentionSegment& g : attn_segments_) {
    TANDEM_RETURN_IF_ERROR(gpu::attention(
        stream_, q + g.first * width, g.count, c.num_heads, pool, d_positions_ + g.first,
        d_tables_ + g.first * table_stride, table_stride, scale, window, out + g.first * width,
        attn_workspace_, 0.0f, g.tile ? gpu::AttentionShape::automatic : gpu::AttentionShape::split,
        out_bf16 != nullptr ? out_bf16 + g.first * width : nullptr));
  }
  return Status::Ok();
}

uint16_t* CudaForward::bf16_input() {
  return mode_ == kernels::GemmMode::invariant && bf16_x_ ? x_bf16_.as<uint16_t>() : nullptr;
}

Expected<gpu::GemmPartials> CudaForward::gemm_partials(const float* x, int64_t m, const uint16_t* w,
                                                       int64_t n, int64_t k, float* y, bool bf16_ready) {
  if (mode_ == kernels::GemmMode::invariant && bf16_x_) {
    if (!bf16_ready) TANDEM_RETURN_IF_ERROR(gpu::to_bf16(stream_, x, x_bf16_.as<uint16_t>(), m * k));
    return gpu::gemm_bf16w_partials(stream_, x_bf16_.data(), DType::bf16, m, w, n, k, y, slices_.as<float>(),
                                    slices_.bytes() / sizeof(float));
  }
  if (mode_ == kernels::GemmMode::invariant)
    return gpu::gemm_bf16w_partials(stream_, x, DType::f32, m, w, n, k, y, slices_.as<float>(),
                                    slices_.bytes() / sizeof(float));
  TANDEM_RETURN_IF_ERROR(gemm(x, m, w, n, k, y));
  return gpu::GemmPartials{y, 1, m, n};
}

Status CudaForward::enqueue_picks(int64_t k, Picks picks) {
  const kernels::PickRule* rules = picks == Picks::sampled ? d_rules_.as<kernels::PickRule>() : nullptr;
  // Straight into the mapped pinned buffer (no copy node), or a device buffer and a copy.
  // Either way d_picks_ gets them too: a chained step's embedding reads them there (ADR 0090).
  const int64_t half = step_parity_ * max_rows_;
  int32_t* device = d_picks_.as<int32_t>() + half;
  int32_t* host = host_picks_.as<int32_t>() + half;
  int32_t* direct = picks_to_host_ ? static_cast<int32_t*>(host_picks_.device_data()) + half : nullptr;
  TANDEM_RETURN_IF_ERROR(gpu::pick_rows(stream_, logits_at(step_parity_), k, model_.config().vocab_size,
                                        rules, direct != nullptr ? direct : device, pick_workspace_,
                                        direct != nullptr ? device : nullptr));
  if (direct != nullptr) return Status::Ok();
  return gpu::copy_async(stream_, host, device, sizeof(int32_t) * static_cast<size_t>(k));
}

Status CudaForward::enqueue_plain(int64_t m, int64_t k, int64_t stride, Picks picks) {
  const ModelConfig& c = model_.config();
  const int64_t hs = c.hidden_size;
  float *x = x_.as<float>(), *g = gather_.as<float>();
  if (stage_inputs_) {  // the row inputs (and sampled rules) upload_rows left in the mapped staging
    const gpu::PinnedBuffer& staging = graph_staging_[step_parity_];
    const bool rules = picks == Picks::sampled;
    TANDEM_RETURN_IF_ERROR(gpu::stage_inputs(
        stream_, static_cast<const int32_t*>(staging.device_data()), row_inputs_.as<int32_t>(), max_rows_, m,
        m * stride,
        rules ? static_cast<const uint8_t*>(staging.device_data()) + graph_rules_offset_ : nullptr,
        d_rules_.data(), rules ? static_cast<int64_t>(sizeof(kernels::PickRule)) * k : 0));
  }
  TANDEM_RETURN_IF_ERROR(embed(m));
  TANDEM_RETURN_IF_ERROR(scale_embeddings(m));
  TANDEM_RETURN_IF_ERROR(per_layer_inputs(m));
  // Every row wants logits (k == m): the output index is the identity, and the
  // final norm, row-wise, can ride on the last residual add (ADR 0056).
  bool final_normed = false;
  TANDEM_RETURN_IF_ERROR(layers(m, stride, k == m, &final_normed));
  if (k == 0) return Status::Ok();
  if (final_normed) {
    TANDEM_RETURN_IF_ERROR(gemm(h_.as<float>(), k, *w_.lm_head, c.vocab_size, hs, logits_at(step_parity_),
                                bf16_input() != nullptr));
  } else {
    TANDEM_RETURN_IF_ERROR(gpu::gather_rows(stream_, x, d_out_index_, k, hs, g));
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(stream_, g, f32(w_.final_norm), g, k, hs, c.rms_norm_eps));
    TANDEM_RETURN_IF_ERROR(gemm(g, k, *w_.lm_head, c.vocab_size, hs, logits_at(step_parity_)));
  }
  TANDEM_RETURN_IF_ERROR(cap_logits(k));
  return picks != Picks::none ? enqueue_picks(k, picks) : Status::Ok();
}

const int32_t* CudaForward::tokens_for(bool chained) const {
  return chained ? d_picks_.as<int32_t>() + (1 - step_parity_) * max_rows_ : d_tokens_;
}

gpu::Graph* CudaForward::graph_for(int64_t m, int64_t k, int64_t stride, Picks picks, bool chained) {
  // The parity's buffers are baked in; a chained step's tokens are the other parity's picks.
  const int64_t variant = (static_cast<int64_t>(picks) * 2 + step_parity_) * 2 + (chained ? 1 : 0);
  gpu::Graph& graph = graphs_[((stride * (kGraphMaxRows + 1) + m) * (kGraphMaxRows + 1) + k) * 12 + variant];
  if (!graph.empty()) return &graph;
  TANDEM_CHECK(mode_ == kernels::GemmMode::invariant);
  token_ids_ = tokens_for(chained);
  Status begun = gpu::Graph::begin_capture(stream_);
  const Status queued = begun.ok() ? enqueue_plain(m, k, stride, picks) : begun;
  token_ids_ = d_tokens_;
  auto captured =
      begun.ok() ? gpu::Graph::end_capture(stream_) : Expected<gpu::Graph>(begun);  // always ends it
  if (!queued.ok() || !captured.ok()) {
    // Fall back to eager launches for good (the same kernels, so the same bits).
    spdlog::warn("cuda: capturing the forward as a CUDA graph failed ({}); launching kernels one by one",
                 (!queued.ok() ? queued : captured.status()).to_string());
    graphs_enabled_ = false;
    return nullptr;
  }
  graph = std::move(captured).value();
  spdlog::debug(
      "cuda: captured the forward of {} rows ({} with logits{}, tables of {} blocks{}) as a CUDA graph", m, k,
      picks == Picks::greedy    ? " and greedy picks"
      : picks == Picks::sampled ? " and sampled picks"
                                : "",
      stride, chained ? ", chained" : "");
  return &graph;
}

Status CudaForward::run_graphed(int64_t m, int64_t k, int64_t stride, Picks picks, bool chained) {
  gpu::Graph* graph = graph_for(m, k, stride, picks, chained);
  if (graph != nullptr) return graph->launch(stream_);
  // Graphs failed (off for good): the same kernels eagerly.
  token_ids_ = tokens_for(chained);
  const Status queued = enqueue_plain(m, k, stride, picks);
  token_ids_ = d_tokens_;
  return queued;
}

Status CudaForward::warm_up(kernels::GemmMode gemm_mode) {
  if (gemm_mode != kernels::GemmMode::invariant || !graphs_enabled_) return Status::Ok();
  TANDEM_RETURN_IF_ERROR(gpu::set_device(w_.device));
  mode_ = gemm_mode;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t stride = graph_stride(1), rows = std::min(kGraphMaxRows, max_rows_);
  // With the greedy picks inside (plain greedy steps, ADR 0070) and without (the rest); and the
  // chained greedy steps on both parities (ADR 0090).
  struct Variant {
    Picks picks;
    int parity;
    bool chained;
  };
  const bool chain = can_chain();
  for (const Variant v : {Variant{Picks::none, 0, false}, Variant{Picks::greedy, 0, false},
                          Variant{Picks::greedy, 1, true}, Variant{Picks::greedy, 0, true}}) {
    if (v.picks == Picks::greedy && !(device_pick_ && graph_pick_)) continue;
    if (v.chained && !chain) continue;
    step_parity_ = v.parity;
    for (int64_t m = 1; m <= rows; ++m) {
      gpu::Graph* graph = graph_for(m, m, stride, v.picks, v.chained);
      if (graph == nullptr) {
        step_parity_ = 0;
        return Status::Ok();  // eager from now on (warned)
      }
    }
  }
  step_parity_ = 0;
  spdlog::info("cuda: captured the decode graphs of 1..{} rows in {:.0f} ms", rows,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return Status::Ok();
}

Expected<int64_t> CudaForward::run_chunk(const ChunkRows& in, const ForwardOptions& options,
                                         const ChunkOutputs& out, kernels::GemmMode gemm_mode,
                                         const ChainedStep* next) {
  Expected<int64_t> k = [&]() -> Expected<int64_t> {
    TANDEM_RETURN_IF_ERROR(discard_chained());
    TANDEM_ASSIGN_OR_RETURN(const int64_t rows, enqueue_and_wait(in, options, out, gemm_mode, next));
    return rows;
  }();
  // A chunk that failed midway may have left its copy out of staging_ (and kernels) queued:
  // let them finish before the next chunk refills it. Every successful chunk ends with its
  // own step done (a chained step after it may still run).
  if (!k.ok()) {
    chained_pending_ = false;
    (void)stream_.synchronize();
  }
  return k;
}

bool CudaForward::can_chain() const {
  return chain_ && graphs_enabled_ && device_pick_ && graph_pick_ && !general_ && !sparse_ &&
         w_.embedding_f32 == nullptr;
}

Status CudaForward::enqueue_chained(const ChainedStep& next) {
  const int64_t m = next.rows.rows;
  TANDEM_CHECK(can_chain() && mode_ == kernels::GemmMode::invariant && m >= 1 && m <= kGraphMaxRows &&
               m <= max_rows_);
  const int parity = 1 - parity_;
  int64_t k = 0, stride = 1;
  TANDEM_RETURN_IF_ERROR(upload_rows(next.rows, parity, &k, &stride, /*graphed=*/true));
  TANDEM_CHECK(k == m);  // every row of a chained step wants its logits (its pick)
  if (next.rules != nullptr) TANDEM_RETURN_IF_ERROR(upload_rules(next.rules, k, parity, /*graphed=*/true));
  step_parity_ = parity;
  parity_ = parity;
  const Picks picks = next.rules != nullptr ? Picks::sampled : Picks::greedy;
  TANDEM_RETURN_IF_ERROR(run_graphed(m, k, stride, picks, /*chained=*/true));
  TANDEM_RETURN_IF_ERROR(done_[parity].record(stream_));
  chained_pending_ = true;
  chained_rows_ = m;
  chained_picks_ = picks;
  return Status::Ok();
}

Expected<int64_t> CudaForward::collect_chained(const ChunkOutputs& out, const ChainedStep* next) {
  TANDEM_CHECK(chained_pending_);
  const int parity = parity_;
  const int64_t k = chained_rows_;
  chained_pending_ = false;
  const Status collected = [&]() -> Status {
    TANDEM_RETURN_IF_ERROR(gpu::set_device(w_.device));
    if (next != nullptr) TANDEM_RETURN_IF_ERROR(enqueue_chained(*next));
    step_parity_ = parity;
    return download_outputs(k, out, /*picks_queued=*/true);
  }();
  step_parity_ = 0;
  if (!collected.ok()) {
    chained_pending_ = false;
    (void)stream_.synchronize();
    return collected;
  }
  return k;
}

Status CudaForward::discard_chained() {
  if (!chained_pending_) return Status::Ok();
  chained_pending_ = false;
  // Its K/V write lands before anything queued later; its outputs are never read. Waiting
  // frees its parity's staging for the next step at once.
  return stream_.synchronize();
}

Expected<int64_t> CudaForward::enqueue_and_wait(const ChunkRows& in, const ForwardOptions& options,
                                                const ChunkOutputs& out, kernels::GemmMode gemm_mode,
                                                const ChainedStep* next) {
  TANDEM_RETURN_IF_ERROR(gpu::set_device(w_.device));
  mode_ = gemm_mode;
  // A step that is not chained takes parity 0's buffers (nothing is queued: discard_chained).
  parity_ = 0;
  step_parity_ = 0;
  const ModelConfig& c = model_.config();
  const int64_t m = in.rows, hs = c.hidden_size;
  const bool all_rows = options.hidden_all_rows && options.hidden == HiddenOutput::after_final_norm;
  const HiddenOutput hidden = all_rows ? HiddenOutput::none : options.hidden;
  bool overrides = false;
  for (int64_t r = 0; r < m; ++r) overrides = overrides || in.embed_rows[r] != nullptr;
  // Small plain steps (decode, verify blocks) replay a captured graph: one
  // launch instead of ~16 per layer. Same kernels, same arguments, same bits.
  // MoE layers read their routing on the host mid-forward: never captured.
  const bool graphed = graphs_enabled_ && mode_ == kernels::GemmMode::invariant && m <= kGraphMaxRows &&
                       !overrides && options.hidden == HiddenOutput::none && !sparse_;
  int64_t k = 0, stride = 1;
  timing_.begin(m, graphed);
  TANDEM_RETURN_IF_ERROR(upload_rows(in, 0, &k, &stride, graphed));
  if (out.picks != nullptr && out.rules != nullptr && k > 0)
    TANDEM_RETURN_IF_ERROR(upload_rules(out.rules, k, 0, graphed));
  timing_.mark(StepTiming::upload);
  if (graphed) {
    // A step's picks and their copy to the host ride in the graph.
    const Picks picks = graph_pick_ && k > 0 ? picks_of(out) : Picks::none;
    TANDEM_RETURN_IF_ERROR(run_graphed(m, k, stride, picks));
    // The next step of these rows goes in behind it before the host waits (ADR 0090).
    if (next != nullptr && picks != Picks::none && k == m) {
      TANDEM_RETURN_IF_ERROR(done_[0].record(stream_));
      TANDEM_RETURN_IF_ERROR(enqueue_chained(*next));
      step_parity_ = 0;
    }
    timing_.mark(StepTiming::enqueue);
    if (k > 0)
      TANDEM_RETURN_IF_ERROR(download_outputs(k, out, picks != Picks::none));
    else
      TANDEM_RETURN_IF_ERROR(stream_.synchronize());
    timing_.end();
    return k;
  }
  float* x = x_.as<float>();
  TANDEM_RETURN_IF_ERROR(embed(m));
  TANDEM_RETURN_IF_ERROR(scale_embeddings(m));
  for (int64_t r = 0; r < m; ++r) {
    if (in.embed_rows[r] != nullptr)
      TANDEM_RETURN_IF_ERROR(gpu::copy_async(stream_, x + r * hs, in.embed_rows[r], sizeof(float) * hs));
  }
  TANDEM_RETURN_IF_ERROR(per_layer_inputs(m));
  TANDEM_RETURN_IF_ERROR(layers(m, stride));
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(hs);
  if (all_rows) {
    float* g = gather_.as<float>();
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(stream_, x, f32(w_.final_norm), g, m, hs, c.rms_norm_eps));
    TANDEM_RETURN_IF_ERROR(gpu::copy_async(stream_, out.hidden_all, g, row_bytes * m));
  }
  if (k == 0) {
    timing_.mark(StepTiming::enqueue);
    TANDEM_RETURN_IF_ERROR(stream_.synchronize());
    timing_.end();
    return int64_t{0};
  }
  float* g = gather_.as<float>();
  TANDEM_RETURN_IF_ERROR(gpu::gather_rows(stream_, x, d_out_index_, k, hs, g));
  if (hidden == HiddenOutput::before_final_norm)
    TANDEM_RETURN_IF_ERROR(gpu::copy_async(stream_, out.hidden, g, row_bytes * k));
  TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(stream_, g, f32(w_.final_norm), g, k, hs, c.rms_norm_eps));
  if (hidden == HiddenOutput::after_final_norm)
    TANDEM_RETURN_IF_ERROR(gpu::copy_async(stream_, out.hidden, g, row_bytes * k));
  TANDEM_RETURN_IF_ERROR(gemm(g, k, *w_.lm_head, c.vocab_size, hs, logits_at(0)));
  TANDEM_RETURN_IF_ERROR(cap_logits(k));
  timing_.mark(StepTiming::enqueue);
  TANDEM_RETURN_IF_ERROR(download_outputs(k, out));
  timing_.end();
  return k;
}

Status CudaForward::download_outputs(int64_t k, const ChunkOutputs& out, bool picks_queued) {
  const int64_t vocab = model_.config().vocab_size;
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(vocab);
  const float* logits = logits_at(step_parity_);
  if (out.picks == nullptr) {
    TANDEM_RETURN_IF_ERROR(gpu::copy_async(stream_, out.logits, logits, row_bytes * static_cast<size_t>(k)));
    return stream_.synchronize();
  }
  if (!picks_queued) TANDEM_RETURN_IF_ERROR(enqueue_picks(k, picks_of(out)));
  // With a chained step queued behind this one, only this one is waited for (ADR 0090).
  if (chained_pending_) {
    TANDEM_RETURN_IF_ERROR(done_[step_parity_].synchronize());
  } else {
    TANDEM_RETURN_IF_ERROR(stream_.synchronize());
  }
  const int32_t* picks = host_picks_.as<int32_t>() + step_parity_ * max_rows_;
  std::memcpy(out.picks, picks, sizeof(int32_t) * static_cast<size_t>(k));
  // The rows without a pick — the caller needs them (PickRule::needs_row), or
  // they allow no token and the caller explains the dead end from the row —
  // come back, each run of consecutive ones in one copy.
  bool copied = false;
  for (int64_t r = 0; r < k;) {
    if (picks[r] >= 0) {
      ++r;
      continue;
    }
    int64_t e = r + 1;
    while (e < k && picks[e] < 0) ++e;
    // Queued behind a chained step, if one is (rare: a row with nothing allowed); its logits
    // are the other parity's.
    TANDEM_RETURN_IF_ERROR(gpu::copy_async(stream_, out.logits + r * vocab, logits + r * vocab,
                                           row_bytes * static_cast<size_t>(e - r)));
    copied = true;
    r = e;
  }
  return copied ? stream_.synchronize() : Status::Ok();
}

bool CudaForward::fused(int l) const { return fuse_ && !general_ && !w_.layers[l].q_norm.bytes(); }

Status CudaForward::layers(int64_t m, int64_t table_stride, bool final_norm, bool* final_normed) {
  const int n = model_.config().num_layers;
  if (final_normed != nullptr) *final_normed = false;
  bool normed = false;  // h holds layer l's attention norm already
  for (int l = 0; l < n; ++l) {
    if (!fused(l)) {
      TANDEM_RETURN_IF_ERROR(layer(l, m, table_stride));
      normed = false;
      continue;
    }
    const bool norm_next = fuse_norm_ && l + 1 < n && fused(l + 1);
    const bool norm_final =
        fuse_norm_ && fuse_launches_ && final_norm && final_normed != nullptr && l + 1 == n;
    const float* norm_after = norm_next    ? f32(w_.layers[l + 1].attn_norm)
                              : norm_final ? f32(w_.final_norm)
                                           : nullptr;
    TANDEM_RETURN_IF_ERROR(layer_fused(l, m, table_stride, normed, norm_after));
    normed = norm_next;
    if (norm_final) *final_normed = true;
  }
  return Status::Ok();
}

Expected<float*> CudaForward::host_logits(size_t floats) {
  if (host_logits_.bytes() < floats * sizeof(float)) {
    // Grown geometrically: pinning is slow (~ms), and a server ramping up from
    // one stream to 64 would otherwise pin 64 times.
    const size_t grown = std::max({floats, size_t{16}, 2 * host_logits_.bytes() / sizeof(float)});
    host_logits_ = gpu::PinnedBuffer();  // free the old one first
    auto b = gpu::PinnedBuffer::allocate(grown * sizeof(float));
    if (!b.ok()) return b.status();
    host_logits_ = std::move(b).value();
  }
  return host_logits_.as<float>();
}

// The same op sequence with each projection's slab sum fused into what follows
// it (fused.cu): the same bits, 8 launches fewer per layer; each residual add
// also writes the RMSNorm that follows it (the MLP's, the next layer's
// attention norm), 2 more; attention writes the o projection's bf16 input
// (ADR 0056), one more. Models with a q/k norm keep the unfused attention
// input (the norm sits between the split and RoPE).
Status CudaForward::layer_fused(int l, int64_t m, int64_t table_stride, bool input_normed,
                                const float* norm_after) {
  const ModelConfig& c = model_.config();
  const DeviceLayer& w = w_.layers[l];
  const int64_t hs = c.hidden_size, qd = c.q_dim(), kvd = c.kv_dim(), qkv_n = qd + 2 * kvd;
  const int64_t inter = c.intermediate_size;
  const float eps = c.rms_norm_eps;
  float *x = x_.as<float>(), *h = h_.as<float>(), *qkv = qkv_.as<float>();
  float *q = q_.as<float>(), *attn = attn_.as<float>();
  const gpu::Stream& s = stream_;
  auto bias = [](const gpu::DeviceBuffer& b) { return b.bytes() ? b.as<float>() : nullptr; };
  gpu::DeviceKvPool pool = geometry_;
  pool.k = k_pool_[l].as<float>();
  pool.v = v_pool_[l].as<float>();
  // bf16 GEMM inputs (ADR 0054): the epilogues before the qkv (previous layer's), gate/up
  // and down projections write them next to their f32 output (x_bf16_), so those GEMMs
  // skip the to_bf16 pass; the same bits either way.
  uint16_t* xb = bf16_input();
  if (!input_normed) TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w.attn_norm), h, m, hs, eps));
  // Attention writes the o projection's bf16 input itself (ADR 0056).
  uint16_t* attn_b = fuse_launches_ ? xb : nullptr;
  {
    auto p = gemm_partials(h, m, w.qkv, qkv_n, hs, qkv, input_normed && xb != nullptr);
    if (!p.ok()) return p.status();
    // Decode and verify steps (ADR 0073, 0081; TANDEM_CUDA_FUSE_ROPE_ROWS).
    if (m <= fuse_rope_rows_) {
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      TANDEM_RETURN_IF_ERROR(gpu::attention_from_qkv(
          s, *p, bias(w.qkv_bias), c.num_heads, pool, d_rope_, f32(w_.inv_freq), c.head_dim,
          kernels::RopeLayout::neox, d_positions_, d_tables_, table_stride, scale, c.layer_window[l], attn,
          attn_workspace_, q, 0.0f, attn_b, d_news_));
    } else {
      TANDEM_RETURN_IF_ERROR(gpu::qkv_rope_kv_write(s, *p, bias(w.qkv_bias), c.num_heads, pool, d_rope_,
                                                    f32(w_.inv_freq), c.head_dim, kernels::RopeLayout::neox,
                                                    d_positions_, d_tables_, table_stride, q));
      TANDEM_RETURN_IF_ERROR(attention(q, m, pool, table_stride, c.layer_window[l], attn, attn_b));
    }
  }
  {
    if (fuse_norm_) {
      TANDEM_RETURN_IF_ERROR(
          project_residual_norm(attn, m, w.o, hs, qd, attn_b != nullptr, bias(w.o_bias), f32(w.mlp_norm)));
    } else {
      auto p = gemm_partials(attn, m, w.o, hs, qd, h, attn_b != nullptr);
      if (!p.ok()) return p.status();
      TANDEM_RETURN_IF_ERROR(gpu::residual_add_partials(s, *p, bias(w.o_bias), x));
      TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w.mlp_norm), h, m, hs, eps));
    }
  }
  float *gate_up = gate_up_.as<float>(), *act = act_.as<float>();
  {
    auto p = gemm_partials(h, m, w.gate_up, 2 * inter, hs, gate_up, fuse_norm_ && xb != nullptr);
    if (!p.ok()) return p.status();
    TANDEM_RETURN_IF_ERROR(gpu::swiglu_partials(s, *p, bias(w.gate_up_bias), act, xb));
  }
  if (norm_after != nullptr)
    return project_residual_norm(act, m, w.down, hs, inter, xb != nullptr, bias(w.down_bias), norm_after);
  auto p = gemm_partials(act, m, w.down, hs, inter, h, xb != nullptr);
  if (!p.ok()) return p.status();
  return gpu::residual_add_partials(s, *p, bias(w.down_bias), x);
}

Status CudaForward::project_residual_norm(const float* in, int64_t m, const DeviceMatrix& w, int64_t n,
                                          int64_t k, bool bf16_ready, const float* bias,
                                          const float* norm_weight) {
  const float eps = model_.config().rms_norm_eps;
  float *x = x_.as<float>(), *h = h_.as<float>();
  uint16_t* xb = bf16_input();
  if (m <= norm_epilogue_rows_ && xb != nullptr && !w.repeated && !w.quantized() && !w.f32 &&
      gpu::gemm_residual_rmsnorm_fits(DType::bf16, m, n, k)) {
    if (!bf16_ready) TANDEM_RETURN_IF_ERROR(gpu::to_bf16(stream_, in, xb, m * k));
    const gpu::ResidualNorm norm{bias, x, norm_weight, eps, h, xb, norm_ticket_.as<uint32_t>()};
    return gpu::gemm_bf16w_residual_rmsnorm(stream_, xb, DType::bf16, m, w.data.as<uint16_t>(), n, k,
                                            slices_.as<float>(), slices_.bytes() / sizeof(float), norm);
  }
  auto p = gemm_partials(in, m, w, n, k, h, bf16_ready);
  if (!p.ok()) return p.status();
  return gpu::residual_add_rmsnorm_partials(stream_, *p, bias, x, norm_weight, eps, h, xb);
}

Status CudaForward::layer(int l, int64_t m, int64_t table_stride) {
  if (general_) return layer_general(l, m, table_stride);
  const ModelConfig& c = model_.config();
  const DeviceLayer& w = w_.layers[l];
  const int64_t hs = c.hidden_size, qd = c.q_dim(), kvd = c.kv_dim(), qkv_n = qd + 2 * kvd;
  const int64_t inter = c.intermediate_size;
  const float eps = c.rms_norm_eps;
  float *x = x_.as<float>(), *h = h_.as<float>(), *qkv = qkv_.as<float>();
  float *q = q_.as<float>(), *kk = k_.as<float>(), *v = v_.as<float>(), *attn = attn_.as<float>();
  const gpu::Stream& s = stream_;
  // Attention block.
  TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w.attn_norm), h, m, hs, eps));
  TANDEM_RETURN_IF_ERROR(gemm(h, m, w.qkv, qkv_n, hs, qkv));
  if (w.qkv_bias.bytes()) TANDEM_RETURN_IF_ERROR(gpu::add_bias(s, qkv, f32(w.qkv_bias), m, qkv_n));
  TANDEM_RETURN_IF_ERROR(gpu::split_qkv(s, qkv, m, qd, kvd, q, kk, v));
  if (w.q_norm.bytes()) {
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, q, f32(w.q_norm), q, m * c.num_heads, c.head_dim, eps));
    TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, kk, f32(w.k_norm), kk, m * c.num_kv_heads, c.head_dim, eps));
  }
  const float* inv_freq = f32(w_.inv_freq);
  TANDEM_RETURN_IF_ERROR(
      gpu::rope(s, q, m, c.num_heads, c.head_dim, d_rope_, inv_freq, c.head_dim, kernels::RopeLayout::neox));
  TANDEM_RETURN_IF_ERROR(gpu::rope(s, kk, m, c.num_kv_heads, c.head_dim, d_rope_, inv_freq, c.head_dim,
                                   kernels::RopeLayout::neox));
  gpu::DeviceKvPool pool = geometry_;
  pool.k = k_pool_[l].as<float>();
  pool.v = v_pool_[l].as<float>();
  TANDEM_RETURN_IF_ERROR(gpu::kv_write(s, pool, kk, v, m, d_positions_, d_tables_, table_stride));
  TANDEM_RETURN_IF_ERROR(attention(q, m, pool, table_stride, c.layer_window[l], attn));
  TANDEM_RETURN_IF_ERROR(gemm(attn, m, w.o, hs, qd, h));
  if (w.o_bias.bytes()) TANDEM_RETURN_IF_ERROR(gpu::add_bias(s, h, f32(w.o_bias), m, hs));
  TANDEM_RETURN_IF_ERROR(gpu::add_inplace(s, x, h, m * hs));
  // MLP block.
  float *gate_up = gate_up_.as<float>(), *act = act_.as<float>();
  TANDEM_RETURN_IF_ERROR(gpu::rmsnorm(s, x, f32(w.mlp_norm), h, m, hs, eps));
  TANDEM_RETURN_IF_ERROR(gemm(h, m, w.gate_up, 2 * inter, hs, gate_up));
  if (w.gate_up_bias.bytes())
    TANDEM_RETURN_IF_ERROR(gpu::add_bias(s, gate_up, f32(w.gate_up_bias), m, 2 * inter));
  TANDEM_RETURN_IF_ERROR(gpu::swiglu_rows(s, gate_up, m, inter, act));
  TANDEM_RETURN_IF_ERROR(gemm(act, m, w.down, hs, inter, h));
  if (w.down_bias.bytes()) TANDEM_RETURN_IF_ERROR(gpu::add_bias(s, h, f32(w.down_bias), m, hs));
  return gpu::add_inplace(s, x, h, m * hs);
}

}  // namespace tandem::model
