// Forward: the one forward entry point for prefill, decode and verify.
//
// A call takes a batch of sequence steps; each appends n >= 1 new tokens to
// one KV sequence at absolute positions [start, start + n), where start must
// equal the sequence's current KV length (truncate the KvCache first to
// re-run positions, e.g. after a speculative rollback). All K/V capacity the
// batch needs is reserved up front, all or nothing: when it does not fit the
// call returns ResourceExhausted and changes nothing. On success every
// sequence's KV length becomes start + n.
//
// Per layer the new rows' K/V are written to the paged pool first, then
// attention reads the pool; every other op is row-wise or the kernels'
// batch-invariant matmul. So a row's results are bitwise independent of the
// batch it rides in, of how its prompt was chunked and of the thread count
// (given one kernel ISA and GemmMode::invariant).
//
// Outputs: logits for the rows each step asks for (none / last / all), in
// step order then position order; optionally the final hidden state of the
// same rows — after the final RMSNorm (the LM head's input) or before it (the
// residual stream). Output spans point into buffers owned by the Forward and
// stay valid until its next run().
//
// Device: the forward runs where its Model is placed (Model::place_on). On
// cuda, the same validation, KV reservation and row flattening run here on
// the host; the rows then run on the device (CudaForward, ADR 0009) with the
// K/V pool storage on the device (the KvCache keeps the block tables), and
// the outputs are copied back into the same host buffers. A device failure
// comes back from run() as a Status (then the KV lengths are unchanged).
//
// Scratch for up to max_rows rows is allocated at construction; larger
// batches are processed in row chunks of max_rows (same results). Output
// buffers grow on demand and are then reused. Not thread-safe: one engine
// thread drives a Forward; its kernels use the given ThreadPool.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace tandem::model {

class CudaForward;  // cuda_forward.h (CUDA builds only)

enum class LogitRows : uint8_t { none, last, all };
enum class HiddenOutput : uint8_t { none, after_final_norm, before_final_norm };

struct SequenceStep {
  SequenceId seq = -1;
  std::span<const int32_t> tokens;  // new tokens, n >= 1
  int64_t start_position = 0;       // absolute position of tokens[0] == KV length
  LogitRows logits = LogitRows::last;
  // Optional input embeddings [tokens.size()][hidden] used instead of the
  // embedding lookup of `tokens` (an MTP head feeds its projected inputs this
  // way); `tokens` still gives the row count.
  std::span<const float> embeddings = {};
  // RoPE position = KV position + rope_offset (an MTP head's entry for
  // token position p sits in KV slot p - 1, so it uses 1).
  int32_t rope_offset = 0;
};

struct ForwardOutput {
  // Row-major [rows][vocab] / [rows][hidden]; rows in step order.
  std::span<const float> logits;
  std::span<const float> hidden;  // empty unless requested
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t hidden_size = 0;
  // first_row[i]: index of step i's first output row (its count is 0, 1 or n).
  std::vector<int64_t> first_row;
  // With ForwardOptions::picks_only: picks[r] = output row r's pick by its
  // kernels::PickRule (ADR 0070, 0072), or -1: the row allows none, its rule
  // needs the row, or (a sampled rule where the picks are not made on a GPU)
  // the caller picks from the row. On a GPU only the picks come back: logits
  // row r is valid only where picks[r] < 0.
  std::span<const int32_t> picks;
  const float* logits_row(int64_t r) const { return logits.data() + r * vocab; }
  // kernels::argmax of output row r: its greedy pick where there is one, else from the row.
  int32_t argmax_row(int64_t r) const;
};

struct ForwardOptions {
  HiddenOutput hidden = HiddenOutput::none;
  // With hidden == after_final_norm: one hidden row per *input* row (in step
  // order), whether or not the row produces logits — what an MTP drafter
  // needs for every prompt position.
  bool hidden_all_rows = false;
  // The caller needs each output row's pick only (a plain greedy or plain
  // sampled request, a benchmark): on a GPU the pick runs on the device and
  // one int32 per row is downloaded instead of the row (ADR 0070, 0072).
  bool picks_only = false;
  // With picks_only: one rule per output row, in output order (empty: every
  // row greedy). A sampled rule's row is picked on the GPU; elsewhere its pick
  // is -1 and the caller's sampler picks from the row. A rule that needs the
  // row gets -1 and its row: a step mixing requests downloads only the rows
  // some request needs (ADR 0072).
  std::span<const kernels::PickRule> pick_rules = {};
  // Decode ahead (ADR 0090): where the forward can (a GPU with graphs and
  // device picks; every step one token with its pick, at most 16, no
  // embeddings, no row needed, the next position inside each sequence's held
  // blocks), the next step of the same sequences — one position on, each
  // token this step's pick, the same rules one position on — is queued on the
  // device before this call waits for its own step. A later run() whose steps
  // and options are exactly that step takes its results instead of computing
  // them; any other run() drops it first (its K/V write lands, nothing else
  // changes: KV lengths and blocks move only with the run() that asks).
  // Same bits as without; a no-op on the CPU.
  bool chain = false;
};

class Forward {
 public:
  // `model` and `kv` must outlive the Forward; `pool` may be nullptr (calling
  // thread only).
  Forward(const Model& model, KvCache& kv, ThreadPool* pool, int64_t max_rows = 128);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  Expected<ForwardOutput> run(std::span<const SequenceStep> steps, const ForwardOptions& options = {});

  // On a GPU: captures the CUDA graphs of plain decode steps (1..16 rows
  // with logits) now instead of at their first use, so a server's first
  // batched steps do not stall on them (ADR 0047). Call after
  // set_gemm_mode; a no-op on the CPU and outside the invariant mode.
  Status warm_up();
  kernels::Ctx& ctx() { return ctx_; }
  // The matmul mode every run() uses (default invariant). The owner's
  // setting: nothing process-wide changes it (the exactness gate reports
  // the mode it settled on and the owner applies it here).
  kernels::GemmMode gemm_mode() const { return ctx_.gemm; }
  void set_gemm_mode(kernels::GemmMode mode) { ctx_.gemm = mode; }
  const Model& model() const { return model_; }
  KvCache& kv() { return kv_; }
  // run() calls whose step was the one queued ahead (ForwardOptions::chain), and
  // steps queued ahead that no run() asked for (dropped), since construction.
  int64_t chained_taken() const { return chained_taken_; }
  int64_t chained_dropped() const { return chained_dropped_; }
  // A step queued ahead is on the device, waiting for the run() that takes or drops it.
  bool device_chain_pending() const;
  // Where run() computes (the model's placement).
  const Placement& placement() const { return model_.placement(); }

 private:
  Status validate_and_reserve(std::span<const SequenceStep> steps);
  // ADR 0090 (forward_chain.cpp): whether `steps` / `options` are exactly the queued chained
  // step; the chained step after this run, when it can have one (after validate_and_reserve and
  // the row tables); what it must match, once this run's picks are known.
  bool chained_matches(std::span<const SequenceStep> steps, const ForwardOptions& options) const;
  bool plan_chain(std::span<const SequenceStep> steps, const ForwardOptions& options);
  void remember_chain(std::span<const SequenceStep> steps);
  bool device_can_chain() const;  // the device backend can queue one (CudaForward::can_chain)
  void run_chunk(int64_t r0, int64_t r1, const ForwardOptions& options);
  // adopt: the rows are the queued chained step (collected, not computed); chain: queue the
  // next one behind them from next_* (ADR 0090).
  Status run_chunk_on_device(int64_t r0, int64_t r1, const ForwardOptions& options, bool adopt = false,
                             bool chain = false);
  void run_layer(int layer, int64_t r0, int64_t m);
  void attention_block(int layer, int64_t r0, int64_t m);
  void mlp_block(int layer, int64_t m);
  // forward_moe.cpp: a sparse MoE layer's MLP half (router, routed experts,
  // fixed-order combine, residual add), and its scratch.
  void moe_block(int layer, int64_t m);
  void shared_expert(int layer, int64_t m);  // qwen2_moe: into shared_out_ / shared_scale_
  void allocate_moe_scratch();
  // The routed experts over `in` (rows m) for the routes in route_expert_ /
  // route_weight_, into expert_out_; then their fixed-order sum into `out`.
  void run_routed_experts(int layer, int64_t m, const float* in, Activation activation);
  void combine_routed(int64_t m, float* out, bool shared);
  // forward_gemma4.cpp: gemma4's MoE block beside the MLP (into moe_x_), the
  // per-layer inputs of rows [r0, r0 + m) (into ple_) and a layer's
  // per-layer-input residual and layer_scalar.
  void gemma4_moe(int layer, int64_t m);
  void per_layer_inputs(int64_t r0, int64_t m);
  void per_layer_block(int layer, int64_t m);

  const Model& model_;
  KvCache& kv_;
  kernels::Ctx ctx_;
  int64_t max_rows_;

  // Per-call row tables (capacity kept across calls).
  std::vector<int32_t> tokens_, positions_, rope_positions_;
  std::vector<const int32_t*> tables_;
  std::vector<const float*> embed_rows_;  // per row: given embedding or nullptr
  std::vector<uint8_t> wants_output_;
  int64_t out_rows_ = 0;

  // Scratch, [max_rows][width].
  AlignedBuffer<float> x_, h_, qkv_, q_, k_, v_, attn_, gate_up_, act_;
  // MoE scratch: router probabilities [max_rows][experts]; per (row, k) the
  // chosen expert and its weight, ascending by expert; the rows routed to
  // one expert and their per-(row, k) outputs [max_rows * top_k][hidden].
  AlignedBuffer<float> router_, expert_in_, expert_gate_up_, expert_act_, expert_out_;
  AlignedBuffer<float> shared_gate_up_, shared_act_, shared_out_, shared_scale_;  // [max_rows][...]
  std::vector<int32_t> route_expert_, route_order_, expert_rows_, expert_slots_;
  std::vector<float> route_weight_;
  // Gemma 4: ones for the weightless norms; per-layer inputs [max_rows][layers
  // * per_layer_input] and their projection, the per-layer gate [max_rows][per_layer_input];
  // the MoE block's router input and expert input / output [max_rows][hidden].
  std::vector<float> ones_;
  AlignedBuffer<float> ple_, ple_proj_, ple_gate_, moe_x_, moe_h_;
  // Outputs, grown on demand.
  AlignedBuffer<float> out_hidden_, out_logits_, gather_;
  // ForwardOptions::picks_only on a GPU that picks on the device (else the
  // picks come from the rows, on the host).
  bool picked_on_device() const;
  std::vector<int32_t> picks_;    // ForwardOptions::picks_only: one per output row
  float* logits_base_ = nullptr;  // this run's logits: out_logits_, or the device backend's pinned buffer
  // The chained step queued on the device (ADR 0090): per sequence what it was queued for; its
  // rules (empty: greedy); the row tables run() hands the device for it.
  struct ChainedRow {
    SequenceId seq = -1;
    uint64_t serial = 0;
    int64_t position = 0;  // the step's start (its sequence's KV length when queued)
    int32_t token = -1;    // the pick it embeds (-1: none; it can never match)
    int32_t block = -1;    // the block its K/V went to
  };
  std::vector<ChainedRow> chained_;
  int64_t chained_taken_ = 0, chained_dropped_ = 0;
  std::vector<kernels::PickRule> chained_rules_, next_rules_;
  std::vector<int32_t> next_tokens_, next_positions_, next_rope_;
  std::vector<uint8_t> next_wants_;
  // The device backend (model placed on cuda), or null; its creation status.
  std::unique_ptr<CudaForward> cuda_;
  Status device_status_;
};

}  // namespace tandem::model
