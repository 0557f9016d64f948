// cuda_forward.h — the CUDA backend of model::Forward (internal to
// tandem_model; compiled only with TANDEM_HAVE_CUDA). ADR 0009.
//
// Forward validates the batch, reserves KV blocks on the host KvCache and
// flattens the steps into rows; this class runs one chunk of those rows on
// the device: embedding, every layer (the same op sequence as the CPU
// forward, with the device kernels of kernels/cuda_ops.h), the final norm and
// the LM head, and copies the requested logits / hidden rows to the host
// buffers Forward exposes. Weights come from the Model's DeviceWeights
// (uploaded once, shared); the K/V pool storage of the KvCache's geometry
// lives here on the device, indexed by the host block tables (uploaded per
// chunk). One CudaForward per KvCache: the device pool mirrors that cache's
// block ids.
//
// Every kernel is batch-invariant (ADR 0006), so a row's bits do not depend
// on the other rows of the call, on chunking or on max_rows.
// Errors (a CUDA failure, out of device memory) are Status values. Not
// thread-safe: the engine thread drives it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/status.h"
#include "device_weights.h"
#include "kernels/cuda_family_ops.h"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_pinned.h"
#include "model/forward.h"
#include "step_timing.h"

namespace tandem::model {

// Small helpers of the CUDA forward's translation units (cuda_forward*.cpp).
namespace cuda_forward_detail {
// A device buffer of at least 16 bytes (so that .as<T>() is never null).
inline Status alloc(kernels::gpu::DeviceBuffer& buffer, size_t bytes) {
  auto b = kernels::gpu::DeviceBuffer::allocate(bytes > 16 ? bytes : 16);
  if (!b.ok()) return b.status();
  buffer = std::move(b).value();
  return Status::Ok();
}
// An optional f32 tensor (nullptr when absent) and a bf16 matrix.
inline const float* f32(const kernels::gpu::DeviceBuffer& b) { return b.bytes() ? b.as<float>() : nullptr; }
inline const uint16_t* bf16(const kernels::gpu::DeviceBuffer& b) { return b.as<uint16_t>(); }
}  // namespace cuda_forward_detail

// Host views of one chunk's rows (Forward's per-row tables, offset to the chunk).
struct ChunkRows {
  int64_t rows = 0;
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* rope_positions = nullptr;
  const int32_t* const* tables = nullptr;
  const float* const* embed_rows = nullptr;  // per row: override embedding or nullptr
  const uint8_t* wants_output = nullptr;
};

// Where the chunk's outputs go on the host (already offset to this chunk).
struct ChunkOutputs {
  float* logits = nullptr;      // [output rows][vocab]
  float* hidden = nullptr;      // [output rows][hidden] (hidden != none and not all rows)
  float* hidden_all = nullptr;  // [rows][hidden] (hidden_all_rows)
  // ForwardOptions::picks_only: [output rows], each row's pick by its rule
  // (rules: one per output row, null: every row greedy); the logits rows are
  // downloaded only where a pick is -1 (ADR 0070, 0072).
  int32_t* picks = nullptr;
  const kernels::PickRule* rules = nullptr;
};

// The next step of a chunk's rows, queued behind it before the host reads the
// chunk's picks (ADR 0090): the same rows one position on (positions, rope
// positions and tables as given; every row wants logits), each row's token the
// chunk's pick of that row, read on the device (rows.tokens is ignored).
struct ChainedStep {
  ChunkRows rows;
  const kernels::PickRule* rules = nullptr;  // one per row, or null: every row greedy
};

class CudaForward {
 public:
  static Expected<std::unique_ptr<CudaForward>> create(const Model& model, const DeviceWeights& weights,
                                                       const KvCache& kv, int64_t max_rows);

  // Runs rows [0, in.rows) (in.rows <= max_rows); returns the output rows written.
  // `gemm`: invariant (the default, ADR 0006's kernel) or splitk, which on the
  // GPU means cuBLAS with bf16 activations — NOT batch-invariant (the probe
  // declines it); FailedPrecondition when libcublas cannot be loaded.
  // next: also queue that chained step behind this chunk (can_chain(), a
  // graphed chunk with picks only) — it stays queued for collect_chained().
  // A chained step still queued is discarded first.
  Expected<int64_t> run_chunk(const ChunkRows& in, const ForwardOptions& options, const ChunkOutputs& out,
                              kernels::GemmMode gemm, const ChainedStep* next = nullptr);
  // ADR 0090. Whether this forward can queue chained steps: graphs, device picks
  // inside them, bf16 embeddings, no Gemma / MoE layer, TANDEM_CUDA_CHAIN on.
  bool can_chain() const;
  bool chained_pending() const { return chained_pending_; }
  // The queued chained step's outputs (its picks; the rows whose pick is -1),
  // optionally queueing the next chained step behind it first; returns its rows.
  Expected<int64_t> collect_chained(const ChunkOutputs& out, const ChainedStep* next = nullptr);
  // Drops a queued chained step: waits for the stream (its writes land; its
  // outputs are never read). A no-op when none is queued.
  Status discard_chained();
  // Captures the graphs of plain decode steps (1..16 rows, each with logits,
  // the shortest table bucket) now rather than at their first use; nothing
  // outside the invariant GEMM mode. A capture failure turns graphs off
  // (warned), as at first use; only a device error is a Status.
  Status warm_up(kernels::GemmMode gemm);
  // Page-locked host memory for `floats` logits, where Forward points
  // ChunkOutputs::logits: the download is then one DMA at the link's speed
  // (ADR 0047). Grown on demand (contents not kept); valid until the next call.
  Expected<float*> host_logits(size_t floats);
  // Whether greedy picks are made on the device (TANDEM_CUDA_DEVICE_PICK, default on): then
  // ChunkOutputs::picks may be set; otherwise the caller picks from the rows.
  bool device_picks() const { return device_pick_; }

 private:
  CudaForward(const Model& model, const DeviceWeights& weights) : model_(model), w_(weights) {}
  // run_chunk's work; it returns with its step done when it succeeds (`next` may still run).
  Expected<int64_t> enqueue_and_wait(const ChunkRows& in, const ForwardOptions& options,
                                     const ChunkOutputs& out, kernels::GemmMode gemm,
                                     const ChainedStep* next);
  // From staging_[parity] (a chained step's inputs go up while the step before it may
  // still be waiting to copy its own).
  Status upload_rows(const ChunkRows& in, int parity, int64_t* out_rows, int64_t* table_stride, bool graphed);
  // k rules into d_rules_, through the page-locked staging of `parity` (a graphed step's
  // first kernel copies them, when it picks inside the graph).
  Status upload_rules(const kernels::PickRule* rules, int64_t k, int parity, bool graphed);
  // Queues `next` behind the step queued last, on the other parity's buffers.
  Status enqueue_chained(const ChainedStep& next);
  // The logits buffer of a parity (1: kGraphMaxRows rows, chained steps only).
  float* logits_at(int parity) const;
  // The block-table stride of a graphed chunk whose longest table has `needed`
  // blocks: the next power of two from kGraphMinStride, at most the pool.
  int64_t graph_stride(int64_t needed) const;
  // Embedding, layers, gather, final norm and LM head into logits_ (no host copies).
  // What a step picks on the device: nothing (rows come back), greedy picks
  // of every row (ADR 0070), or picks by the uploaded rules (ADR 0072).
  enum class Picks { none, greedy, sampled };
  static Picks picks_of(const ChunkOutputs& out) {
    return out.picks == nullptr ? Picks::none : out.rules == nullptr ? Picks::greedy : Picks::sampled;
  }
  // picks: then each row's pick too, copied to host_picks_.
  // On step_parity_'s logits and picks buffers; the tokens from token_ids_.
  Status enqueue_plain(int64_t m, int64_t k, int64_t stride, Picks picks);
  // chained: the tokens are the other parity's device picks (ADR 0090).
  Status run_graphed(int64_t m, int64_t k, int64_t stride, Picks picks, bool chained = false);
  // The picks of logits_'s k rows (by d_rules_ when sampled), and their copy
  // into host_picks_ (queued, not waited for).
  Status enqueue_picks(int64_t k, Picks picks);
  // Every layer, in order.
  // final_norm: the last layer's residual add may also write the final RMSNorm of every row into h_
  // (and x_bf16_): *final_normed says whether it did (the last layer fused, fuse_norm_, fuse_launches_).
  Status layers(int64_t m, int64_t table_stride, bool final_norm = false, bool* final_normed = nullptr);
  // A step's token ids on the device: d_tokens_, or for a chained step the other parity's picks.
  const int32_t* tokens_for(bool chained) const;
  // The graph of (rows, output rows, stride), captured if new; nullptr when
  // capturing failed (graphs are then off for good).
  kernels::gpu::Graph* graph_for(int64_t m, int64_t k, int64_t stride, Picks picks, bool chained = false);
  Status layer(int l, int64_t m, int64_t table_stride);
  // input_normed: h already holds the attention norm of x (the previous
  // layer's last epilogue wrote it); norm_after: when not null, the RMSNorm weight
  // (layer l + 1's attention norm, or the final norm) whose norm of x this layer's
  // last residual add writes into h.
  Status layer_fused(int l, int64_t m, int64_t table_stride, bool input_normed, const float* norm_after);
  // The o / down projection of `in` [m][k] by w, then x += it (+ bias) and h (and the bf16
  // input) = rmsnorm(x) by norm_weight: in the GEMM's last block up to norm_epilogue_rows_
  // rows where it fits (ADR 0089), else residual_add_rmsnorm_partials after it. Same bits.
  Status project_residual_norm(const float* in, int64_t m, const DeviceMatrix& w, int64_t n, int64_t k,
                               bool bf16_ready, const float* bias, const float* norm_weight);
  bool fused(int l) const;
  // The Gemma 2/3/4 and sparse-MoE families (cuda_forward_families.cpp, ADR 0045):
  // the unfused op sequence of forward.cpp's attention_block / mlp_block /
  // moe_block with every family hook, used for every layer of such a model.
  Status allocate_family_scratch();
  Status layer_general(int l, int64_t m, int64_t table_stride);
  Status attention_general(int l, int64_t m, int64_t table_stride);
  Status mlp_general(int l, int64_t m);
  Status moe_general(int l, int64_t m);
  // Every expert any row chose, over exactly its rows of `in`, into expert_out_.
  Status routed_experts(int l, int64_t m, const float* in, Activation activation);
  // Gemma 4 (ADR 0036): the MoE block beside the MLP (into moe_x_), the
  // per-layer inputs (once per chunk, after the embedding) and each layer's
  // per-layer-input residual and layer_scalar; the pool a layer attends to.
  Status gemma4_moe(int l, int64_t m);
  Status per_layer_inputs(int64_t m);
  Status per_layer_block(int l, int64_t m);
  kernels::gpu::DeviceKvPool layer_pool(int l) const;
  // The embedding scale (Gemma) on rows [0, m) of x_, and final soft-capping of k logit rows.
  Status scale_embeddings(int64_t m);
  Status cap_logits(int64_t k);
  // The k rows of logits_ to the host: every row into out.logits, or (out.picks
  // set) each row's greedy pick, picked on the device, into out.picks, and the
  // rows too only when some row has none. picks_queued: the stream already
  // holds enqueue_picks (a graph with the picks inside).
  // From step_parity_'s buffers; a step with picks waits for done_[step_parity_] only.
  Status download_outputs(int64_t k, const ChunkOutputs& out, bool picks_queued = false);
  // The GEMM without its slab sum (invariant mode), or cuBLAS into y (one slab).
  // bf16_ready: x_bf16_ already holds x rounded to bf16 (an epilogue wrote it).
  Expected<kernels::gpu::GemmPartials> gemm_partials(const float* x, int64_t m, const uint16_t* w, int64_t n,
                                                     int64_t k, float* y, bool bf16_ready = false);
  // x_bf16_ when the invariant GEMMs take bf16 inputs (ADR 0054), else null: where an
  // epilogue writes the next GEMM's input.
  uint16_t* bf16_input();
  Status gemm(const float* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
              bool bf16_ready = false);
  // A projection of any kind (DeviceMatrix): bf16 as above; f16 / f32 split
  // into bf16 terms (ADR 0083): the same GEMM over k' = terms · k against x
  // repeated into x_rep_ (bf16_ready is moot); or quantized (ADR 0077): x's
  // rows quantized into act_blocks_, then each part's gpu::gemm_quant into its
  // columns of y (one slab; bf16_ready is moot).
  Status gemm(const float* x, int64_t m, const DeviceMatrix& w, int64_t n, int64_t k, float* y,
              bool bf16_ready = false);
  Expected<kernels::gpu::GemmPartials> gemm_partials(const float* x, int64_t m, const DeviceMatrix& w,
                                                     int64_t n, int64_t k, float* y, bool bf16_ready = false);
  Status gemm_quantized(const float* x, int64_t m, const DeviceMatrix& w, int64_t n, int64_t k, float* y);
  Expected<const float*> split_input(const float* x, int64_t m, int64_t k, int terms);
  // The embedding rows of the chunk's tokens into x_ (bf16 table, or f32 for a quantized one).
  Status embed(int64_t m);
  // Attention over the chunk's rows, one call per attn_segments_ entry (ADR 0043).
  Status attention(const float* q, int64_t m, const kernels::gpu::DeviceKvPool& pool, int64_t table_stride,
                   int window, float* out, uint16_t* out_bf16 = nullptr);

  const Model& model_;
  const DeviceWeights& w_;
  int64_t max_rows_ = 0;
  int64_t max_table_ = 0;  // blocks per sequence at most (the pool's size)
  kernels::gpu::Stream stream_;
  std::vector<kernels::gpu::DeviceBuffer> k_pool_, v_pool_;
  kernels::gpu::DeviceKvPool geometry_;
  // Scratch [max_rows][width] and per-chunk row inputs.
  kernels::gpu::DeviceBuffer x_, h_, qkv_, q_, k_, v_, attn_, gate_up_, act_, gather_, logits_;
  // tokens | positions | rope positions | out index | block tables
  kernels::gpu::DeviceBuffer row_inputs_;
  kernels::GemmMode mode_ = kernels::GemmMode::invariant;
  // CUDA graphs of enqueue_plain, keyed by (table stride, rows, output rows),
  // rows <= kGraphMaxRows. The stride fixes the split attention's grid (one
  // block per 32 keys a table can hold), so it follows the longest sequence
  // in power-of-two buckets instead of the whole pool (ADR 0047).
  static constexpr int64_t kGraphMaxRows = 16;
  static constexpr int64_t kGraphMinStride = 16;
  std::map<int64_t, kernels::gpu::Graph> graphs_;
  bool graphs_enabled_ = true;
  bool fuse_ = true;       // layer_fused (TANDEM_CUDA_FUSE=0: layer's unfused glue)
  bool fuse_norm_ = true;  // residual adds carry the next RMSNorm (TANDEM_CUDA_FUSE_NORM=0: not)
  // Attention writes the o projection's bf16 input; a graphed step whose every row wants logits
  // takes the final norm from the last residual add (ADR 0056; TANDEM_CUDA_FUSE_LAUNCHES=0: not).
  bool fuse_launches_ = true;
  bool general_ = false;  // a Gemma / MoE feature: layer_general for every layer
  bool sparse_ = false;   // MoE layers: the host reads each layer's routing (no graphs)
  // MoE scratch: router logits [rows][experts], the routing [rows][top_k]
  // (experts, weights), per-expert row lists (gather rows | output slots) and
  // the experts' rows; the shared expert's [rows][...] buffers.
  kernels::gpu::DeviceBuffer router_logits_, route_experts_, route_weights_, route_lists_;
  kernels::gpu::DeviceBuffer expert_in_, expert_gate_up_, expert_act_, expert_y_, expert_out_;
  kernels::gpu::DeviceBuffer shared_gate_up_, shared_act_, shared_out_, shared_scale_;
  std::vector<int32_t> route_host_, route_lists_host_;
  std::vector<int64_t> route_begin_, route_fill_;  // per expert: list offsets, fill cursors
  // Gemma 4: the MoE branch [rows][hidden] x 2; per-layer inputs [rows][layers * P] x 2, gate [rows][P].
  kernels::gpu::DeviceBuffer moe_x_, moe_h_, ple_, ple_proj_, ple_gate_;
  // GEMM inputs rounded to bf16, one mma per k-step (the default, ADR 0054);
  // TANDEM_CUDA_ACTIVATIONS=f32: the hi + lo split (ADR 0006). Both invariant.
  bool bf16_x_ = true;
  bool graph_stride_pool_ = false;  // TANDEM_CUDA_GRAPH_STRIDE=pool: graphs take the pool's stride
  std::unique_ptr<kernels::gpu::CublasGemm> cublas_;          // opened on the first splitk chunk
  kernels::gpu::DeviceBuffer x_bf16_;                         // the bf16 copy of x (cuBLAS, bf16_x_)
  kernels::gpu::DeviceBuffer slices_;                         // the K-sliced GEMM's partial sums
  kernels::gpu::DeviceBuffer act_blocks_;                     // quantized GEMM inputs (ADR 0077)
  kernels::gpu::DeviceBuffer x_rep_;                          // split weights' repeated inputs (ADR 0083)
  kernels::gpu::DeviceBuffer attn_partials_, attn_counters_;  // split attention's workspace
  kernels::gpu::AttentionWorkspace attn_workspace_;
  // The chunk's rows as attention calls: a run of one sequence's rows longer
  // than kAttentionTileMinRows takes the tile shape; the rows between such
  // runs (decode / verify rows of many sequences) one split/serial call.
  struct AttentionSegment {
    int64_t first, count;
    bool tile;
  };
  std::vector<AttentionSegment> attn_segments_;
  // The row inputs on the host (5 * max_rows + rows * stride ints), then the pick rules; one per parity.
  kernels::gpu::PinnedBuffer staging_[2];
  // Chained steps (ADR 0090). A step that is not chained runs on parity 0's
  // buffers; chained steps alternate (the first on 1), each reading the picks
  // of the step before it from the other parity's half of d_picks_.
  bool chain_ = true;  // TANDEM_CUDA_CHAIN (0: never; for comparison)
  bool chained_pending_ = false;
  int64_t chained_rows_ = 0;
  Picks chained_picks_ = Picks::none;
  int parity_ = 0;                         // of the step queued last
  int step_parity_ = 0;                    // of the step being queued (enqueue_plain, download_outputs)
  kernels::gpu::Event done_[2];            // per parity: the end of its step (picks in host memory)
  kernels::gpu::DeviceBuffer logits_alt_;  // parity 1's logits [kGraphMaxRows][vocab]
  // A graphed step's row inputs and rules, written by the host into page-locked memory the
  // device maps and copied by the step's first kernel (gpu::stage_inputs) instead of a DMA
  // before it — the DMA's start was most of the gap between steps (ADR 0090). One per parity,
  // sized for kGraphMaxRows rows of the pool's longest table; TANDEM_CUDA_STAGE_INPUTS=0: the DMA.
  bool stage_inputs_ = true;
  kernels::gpu::PinnedBuffer graph_staging_[2];
  size_t graph_rules_offset_ = 0;       // bytes into graph_staging_ where the rules go
  const int32_t* token_ids_ = nullptr;  // what embed() reads: d_tokens_, or the previous picks
  kernels::gpu::PinnedBuffer host_logits_;
  // d_picks_ and host_picks_: [2][max_rows], one half per parity.
  kernels::gpu::DeviceBuffer d_picks_, pick_best_, pick_index_, pick_counters_;
  kernels::gpu::DeviceBuffer d_rules_;  // [max_rows] kernels::PickRule, uploaded by a step with rules
  kernels::gpu::PickWorkspace pick_workspace_;
  kernels::gpu::PinnedBuffer host_picks_;
  bool device_pick_ = true;  // TANDEM_CUDA_DEVICE_PICK (0: greedy picks from downloaded rows, for comparison)
  bool graph_pick_ = true;   // TANDEM_CUDA_GRAPH_PICK (0: a graphed step's picks queued after the graph)
  // TANDEM_CUDA_FUSE_ROPE(_ROWS): calls of up to this many rows take attention_from_qkv (ADR 0073, 0081).
  int64_t fuse_rope_rows_ = 1;
  bool picks_to_host_ = true;       // TANDEM_CUDA_PICKS_TO_HOST (0: picks copied from a device buffer)
  int64_t norm_epilogue_rows_ = 0;  // TANDEM_CUDA_NORM_EPILOGUE_ROWS (ADR 0089)
  kernels::gpu::DeviceBuffer norm_ticket_;  // the residual-norm epilogue's ticket (one uint32)
  StepTiming timing_{"cuda forward"};
  int32_t* d_tokens_ = nullptr;
  int32_t* d_positions_ = nullptr;
  int32_t* d_rope_ = nullptr;
  int32_t* d_out_index_ = nullptr;
  int32_t* d_news_ = nullptr;  // per row: the rows before it of its sequence (ADR 0081)
  int32_t* d_tables_ = nullptr;
};

}  // namespace tandem::model
