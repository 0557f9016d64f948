// kernels/cuda_ops.h — the CUDA op contract (compiled only when TANDEM_HAVE_CUDA).
//
// Owns: RAII device memory (DeviceBuffer, plain cudaMalloc — never managed
// memory) and streams (Stream), and the device kernels the model layer will
// call: the bf16-weight GEMM, RMSNorm, RoPE and SiLU·mul (tested on an H200),
// and paged attention (not yet run on a GPU). Numerics and the
// reduction orders are docs/adr/0006-cuda-kernels.md; the kernels are
// described in docs/kernels.md ("CUDA").
//
// Batch invariance (ADR 0001, on the GPU): every op computes each output
// element with a floating-point reduction order that depends only on the
// reduction length (and absolute positions) — never on the number of rows M,
// on which rows share the call, or on the tile shape the launcher picks.
// The GEMM issues, for every output, the same chain of mma.sync m16n8k16
// instructions over k = 0, 32, 64, … in order, with the output in the same
// slot of the same instruction; blocks and warps split N and M only, never K.
// GemmTile selects a tile shape; every shape gives bitwise-identical results
// (tested), so `automatic` may choose by M freely.
//
// Units and layouts: all pointers passed to ops are device pointers.
// Activations are row-major [rows][dim] (f32, or bf16 where stated); weights
// are the Hugging Face nn.Linear layout, row-major [n][k] bf16 (no repacking:
// row n is output column n). Positions are absolute token positions (0-based).
// bf16 values travel as uint16_t bit patterns.
//
// Errors: user-caused or environmental failures (bad shapes, misaligned
// pointers, out of device memory, no device, a failed launch) come back as a
// Status whose message names the call — never an abort. Launches are
// asynchronous on the given stream: a fault inside a kernel surfaces at the
// next synchronising call (Stream::synchronize, a download) as its Status.
//
// Thread-safety: the functions keep no global state (except the CUDA
// runtime's own per-device context); distinct streams may be driven from
// distinct threads. A Stream or DeviceBuffer object is thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/status.h"
#include "kernels/ops.h"

struct CUstream_st;     // cudaStream_t is CUstream_st*
struct CUgraphExec_st;  // cudaGraphExec_t is CUgraphExec_st*
struct CUevent_st;      // cudaEvent_t is CUevent_st*

namespace tandem::kernels::gpu {

// Number of visible CUDA devices; 0 when there is no device or no driver.
int device_count();
// Makes `device` current for the calling thread (cudaSetDevice).
Status set_device(int device);

// Programmatic dependent launch (ADR 0041): whether the forward's kernels are
// queued so that each may start while the previous one is still running
// (then waits for it in-kernel). True when the current device is sm_90 or
// newer and neither TANDEM_CUDA_PDL=0 nor set_programmatic_launch(false) turned
// it off. It moves only when blocks start, never a bit of any result.
bool programmatic_launch_enabled();
// Overrides TANDEM_CUDA_PDL for the launches queued from now on (tests,
// benchmarks); a device without support stays off. Graphs already captured
// keep the launches they were captured with.
void set_programmatic_launch(bool allowed);

// An owned CUDA stream (non-blocking with respect to the legacy stream).
class Stream {
 public:
  Stream() = default;
  static Expected<Stream> create();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  CUstream_st* handle() const { return handle_; }
  // Waits for all work queued on the stream; a kernel fault is reported here.
  Status synchronize() const;

 private:
  CUstream_st* handle_ = nullptr;
};

// An owned CUDA event (timing off): a point in a stream's queue that the host
// can wait for without waiting for the work queued after it (ADR 0090).
class Event {
 public:
  Event() = default;
  static Expected<Event> create();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
  // Marks the end of the work queued on `stream` so far.
  Status record(const Stream& stream);
  // Waits until the recorded work is done; a kernel fault is reported here.
  Status synchronize() const;

 private:
  CUevent_st* handle_ = nullptr;
};

// An owned, instantiated CUDA graph: the kernels queued on a stream between
// begin_capture and end_capture, replayed with launch() at the cost of one
// launch (the host leaves the per-kernel path). Replays run the captured
// kernels with the captured arguments — pointers to fixed buffers whose
// contents the caller refreshes before each launch. Capture uses the relaxed
// mode; a failure at any step is a Status (the caller can fall back to
// launching eagerly).
class Graph {
 public:
  Graph() = default;
  static Status begin_capture(const Stream& stream);
  static Expected<Graph> end_capture(const Stream& stream);
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();
  Status launch(const Stream& stream) const;
  bool empty() const { return exec_ == nullptr; }

 private:
  CUgraphExec_st* exec_ = nullptr;
};

// An owned device allocation (cudaMalloc; 256-byte aligned). Empty when
// default-constructed or moved from.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Expected<DeviceBuffer> allocate(size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

  // Copies to/from host memory, ordered on `stream`; upload returns once the
  // copy is queued, download once the bytes are on the host. Ranges must lie
  // inside the buffer (else InvalidArgument).
  Status upload(const void* host, size_t bytes, const Stream& stream, size_t offset = 0);
  Status download(void* host, size_t bytes, const Stream& stream, size_t offset = 0) const;
  // Sets every byte to `value` (asynchronous on `stream`); tests poison outputs with it.
  Status fill_bytes(uint8_t value, const Stream& stream);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Copies `bytes` between any two of host and device memory (cudaMemcpyDefault),
// ordered on `stream`. Pageable host memory makes the call wait for the copy;
// it returns once the copy is queued otherwise.
Status copy_async(const Stream& stream, void* dst, const void* src, size_t bytes);

// The device's read bandwidth in bytes/s: one read of `bytes` of device memory
// (allocated here for the call), best of `passes` after one warm-up pass.
Expected<double> measure_read_bandwidth(const Stream& stream, size_t bytes, int passes);

// ---------------------------------------------------------------- GEMM
// Tile shapes of the one GEMM kernel. All give identical bits (tested).
//   small:  32–64 weight rows × 8–16 rows of x per block, deep pipeline — M ≤ 16
//           (with TANDEM_CUDA_WIDE_TILE, 32 or 64 x rows up to M = 64: ADR 0060).
//   medium: 64 × 64 — mid-sized M.
//   large:  128 × 128 — prefill-sized M.
enum class GemmTile : uint8_t { automatic, small, medium, large };
const char* gemm_tile_name(GemmTile tile);
// The tile `automatic` picks for this shape (depends on M, N and the device's
// multiprocessor count, which never changes a bit of the result).
GemmTile gemm_tile_for(int64_t m, int64_t n, int multiprocessors);

// y[r][j] = sum_k x[r][k] * w[j][k]  (y = x·Wᵀ), r < m, j < n; y is f32 [m][n].
// w: bf16 [n][k] in the RELAID layout (relay_weights_bf16 below, ADR 0057:
// rows relaid_row_pitch(k) apart, each 32-k chunk in k16-step order); the
// device weights of the invariant path are stored so. x: [m][k] of x_dtype — DType::bf16 (one mma per k-step)
// or DType::f32 (split x = hi + lo into two bf16 terms, two mmas per k-step, ≈ 2^-17 relative representation
// error; ADR 0006). f32 accumulation. Each output's reduction is the fixed mma chain described at the top;
// the result does not depend on m, on the other rows of x, or on `tile`. Requires k % 8 == 0, n > 0, m >= 0
// (m == 0 is a no-op), x/w/y 16-byte aligned; else InvalidArgument. Asynchronous on `stream`; no allocation.
Status gemm_bf16w(const Stream& stream, const void* x, DType x_dtype, int64_t m, const uint16_t* w, int64_t n,
                  int64_t k, float* y, GemmTile tile = GemmTile::automatic);

// cuBLAS (dlopen'ed at open(); no binary links it) as the explicit
// NON-invariant GEMM option — the GPU analogue of GemmMode::splitk. bf16 x
// and W, f32 output, f32 compute; cuBLAS chooses its algorithm per shape, so
// a row's bits may depend on M (the exactness probe declines it). open()
// fails with FailedPrecondition when libcublas is not found. Move-only; one
// per thread.
class CublasGemm {
 public:
  static Expected<CublasGemm> open();
  CublasGemm();
  CublasGemm(CublasGemm&&) noexcept;
  CublasGemm& operator=(CublasGemm&&) noexcept;
  ~CublasGemm();
  // y[m][n] = x[m][k] · w[n][k]ᵀ, asynchronous on `stream`.
  Status gemm(const Stream& stream, const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
              float* y) const;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
};

// The K-sliced GEMM: the same product with k cut into `slices` fixed slices
// [z·slice, (z+1)·slice) — each the gemm_bf16w chain over its slice, its
// partial written to workspace slab z — then y = slab 0 + slab 1 + … in slab
// order. The slicing is gemm_slicing(n, k): a function of the weight's shape
// only, never of m, so every output still has one fixed reduction order for
// every M and tile (batch-invariant; a different order from gemm_bf16w, so
// different bits from it). It exists because without split-K a narrow N
// (e.g. 896 or 4096 rows) gives too few blocks to stream the weights at small
// M. Needs workspace of slices·m·n floats (gemm_slicing(n, k).slices == 1:
// none; then it is exactly gemm_bf16w); InvalidArgument otherwise.
struct GemmSlicing {
  int slices = 1;
  int64_t slice = 0;  // k per slice (a multiple of 128 — TANDEM_CUDA_SLICE_MIN, ADR 0075 — or k)
};
GemmSlicing gemm_slicing(int64_t n, int64_t k);
Status gemm_bf16w_sliced(const Stream& stream, const void* x, DType x_dtype, int64_t m, const uint16_t* w,
                         int64_t n, int64_t k, float* y, float* workspace, size_t workspace_floats,
                         GemmTile tile = GemmTile::automatic);

// The K-sliced GEMM without its final sum: the partial slabs, for an epilogue
// that sums them itself (slab 0 + slab 1 + … in slab order, the sum
// gemm_bf16w_sliced writes) fused with what follows. slices == 1: the
// product is in y (slabs == y). Same arguments and errors as
// gemm_bf16w_sliced.
struct GemmPartials {
  const float* slabs = nullptr;  // [slices][m][n]
  int slices = 1;
  int64_t m = 0, n = 0;
};
Expected<GemmPartials> gemm_bf16w_partials(const Stream& stream, const void* x, DType x_dtype, int64_t m,
                                           const uint16_t* w, int64_t n, int64_t k, float* y,
                                           float* workspace, size_t workspace_floats,
                                           GemmTile tile = GemmTile::automatic);

// gemm_bf16w_partials followed by residual_add_rmsnorm_partials, with the
// add and the norm done by the GEMM's last block to finish (ADR 0089): one
// launch fewer, the same bits in x, h and h_bf16 (the same slab order, the
// same reduction tree). Each block stores its partial slab, then takes a
// ticket; the block that takes the last sums the slabs of all m rows, adds
// bias and the residual, and writes the norm, so it is for a few rows only
// (decode steps). Runs where gemm_residual_rmsnorm_fits: bf16 x, 1 <= m <=
// kResidualNormMaxRows, n a multiple of 4 (16-byte aligned x, h, weight and
// bias) and at most 16,384, a matrix that gemm_slicing cuts into >= 2 slices and
// whose automatic tile is the sliced or small class's default (variants 21,
// 3); elsewhere the call is InvalidArgument (take the two calls instead).
// `ticket`: one device counter, 0 before the first call; the last block
// resets it, so calls ordered on one stream may share it.
struct ResidualNorm {
  const float* bias = nullptr;    // [n] or null
  float* x = nullptr;             // the residual stream [m][n]: x += product (+ bias)
  const float* weight = nullptr;  // the norm's weight [n]
  float eps = 0.0f;
  float* h = nullptr;          // [m][n]: rmsnorm(x)
  uint16_t* h_bf16 = nullptr;  // [m][n] or null: h rounded to bf16
  uint32_t* ticket = nullptr;
};
constexpr int64_t kResidualNormMaxRows = 8;
bool gemm_residual_rmsnorm_fits(DType x_dtype, int64_t m, int64_t n, int64_t k);
Status gemm_bf16w_residual_rmsnorm(const Stream& stream, const void* x, DType x_dtype, int64_t m,
                                   const uint16_t* w, int64_t n, int64_t k, float* workspace,
                                   size_t workspace_floats, const ResidualNorm& norm);

// The relaid weight layout (ADR 0057). Row j of a relaid matrix holds, for
// each 32-k chunk, the chain's k16 step 0 (k 8q .. 8q+3 for q = 0..3) then
// step 1 (k 8q+4 .. 8q+7), so that each step is 32 contiguous bytes (what a
// TMA box with the 128-byte swizzle lands as wgmma's B operand); rows are
// relaid_row_pitch(k) elements apart, k past the end zero. relay_weights_bf16
// writes it on the device from natural rows w [n][k] (k % 8 == 0) into
// `relaid` (n · relaid_row_pitch(k) bf16, not overlapping w); the _host
// version is the same permutation on the host (tests, uploads).
// to_bf16_relaid: f32 rows x [m][k] → bf16 [m][relaid_row_pitch(k)] in the
// same permutation, so that a plain GEMM over relaid x and relaid w (the
// cuBLAS option, k' = relaid_row_pitch(k)) is the product x·Wᵀ.
int64_t relaid_row_pitch(int64_t k);
Status relay_weights_bf16(const Stream& stream, const uint16_t* w, int64_t n, int64_t k, uint16_t* relaid);
void relay_weights_bf16_host(const uint16_t* w, int64_t n, int64_t k, uint16_t* relaid);
Status to_bf16_relaid(const Stream& stream, const float* x, int64_t m, int64_t k, uint16_t* out);

// Quantized weights (ADR 0077): q8_0, q4_0, q5_0, q4_k, q5_k, q6_k in the
// CPU's packed layout (PackedMatrix::data(), kernels/quant/layout.h; one
// matrix part at a time), uploaded byte for byte. quantize_act_rows turns f32
// rows x [m][k] (k % 32 == 0) into the int8 activation blocks the CPU makes
// (quant::ActBlock, quant_act_bytes(m, k) bytes at `blocks`); gemm_quant
// writes y[r * ldy + j] for r < m, j < n from the rows x (f32 [m][k], 8-byte
// aligned) and the weights: for every output the CPU reference's chain
// (ADR 0013), so the bits are the CPU's for the same rows and do not depend
// on m. Up to quant_fused_max_rows() rows it quantizes x itself; above, it
// reads `blocks`, which quantize_act_rows must have filled from x (a lone
// row: the round or the streamed kernel, ADR 0078; up to kQuantFewRows rows
// the few-row kernel; then the int8 tensor cores). k must be a multiple of
// the type's super-block (256 for the K types, else 32); InvalidArgument
// otherwise. Asynchronous on `stream`; no allocation. quant_fused_max_rows():
// kQuantFusedMaxRows, or TANDEM_CUDA_QUANT_FUSED_ROWS (0..8; read once) — the
// same bits either way.
inline constexpr int64_t kQuantFusedMaxRows = 0;  // ADR 0078: a lone row too is quantized once per input
inline constexpr int64_t kQuantFewRows = 8;
int64_t quant_fused_max_rows();
size_t quant_act_bytes(int64_t m, int64_t k);
Status quantize_act_rows(const Stream& stream, const float* x, int64_t m, int64_t k, void* blocks);
bool gemm_quant_supports(DType dtype);
Status gemm_quant(const Stream& stream, const float* x, const void* blocks, int64_t m, const uint8_t* w,
                  DType dtype, int64_t n, int64_t k, float* y, int64_t ldy);

// f32 weights w [n][k] in natural rows (ADR 0080: llama.cpp's F32 MoE routers
// and shared-expert gates): y[r * ldy + j] = the chain acc = fma(x[r][k'],
// w[j][k'], acc) over k' = 0 … k−1 from 0 — the CPU's AVX2 / AVX-512 chain —
// for r < m, j < n; each output's one chain, so the bits do not depend on m.
// Asynchronous on `stream`; no allocation. InvalidArgument on a bad shape.
Status gemm_f32w(const Stream& stream, const float* x, int64_t m, const float* w, int64_t n, int64_t k,
                 float* y, int64_t ldy);

// ---------------------------------------------------------------- row-wise ops
// One block per row; fixed block size and fixed reduction tree, so each row's
// bits are independent of `rows`. f32 throughout.

// y[r] = x[r] * (1 / sqrt(mean(x[r]^2) + eps)) * weight   (in place allowed)
Status rmsnorm(const Stream& stream, const float* x, const float* weight, float* y, int64_t rows, int64_t dim,
               float eps);

// out[i] = silu(gate[i]) * up[i] = gate / (1 + exp(-gate)) * up
Status silu_mul(const Stream& stream, const float* gate, const float* up, float* out, int64_t count);

// Rotates the first rotary_dim dims of each head of each row in place, the
// convention of the CPU rope() (kernels/ops.h): angle = f32(position) ·
// inv_freq[i] rounded to f32, cos/sin evaluated in double and rounded once,
// rotation a·c − b·s, b·c + a·s with every product rounded (no FMA).
// x: [rows][n_heads][head_dim]; positions: [rows] (device); inv_freq:
// [rotary_dim / 2] (device, from kernels::rope_inv_freq). rotary_dim even,
// ≤ head_dim ≤ 512.
Status rope(const Stream& stream, float* x, int64_t rows, int n_heads, int head_dim, const int32_t* positions,
            const float* inv_freq, int rotary_dim, RopeLayout layout);

// ---------------------------------------------------------------- attention
// One layer's paged K/V pool on the device, f32, the CPU KvPool layout: block
// b, slot s, kv head h starts at base + ((b * tokens_per_block + s) * n_kv_heads + h)
// * head_dim. Block tables are one device array: row r's table starts at
// block_tables + r * table_stride.
struct DeviceKvPool {
  float* k = nullptr;
  float* v = nullptr;
  int32_t tokens_per_block = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

// Writes K/V rows for new tokens: k_new/v_new [rows][n_kv_heads][head_dim];
// row r goes to position positions[r] through its block table.
Status kv_write(const Stream& stream, const DeviceKvPool& pool, const float* k_new, const float* v_new,
                int64_t rows, const int32_t* positions, const int32_t* block_tables, int64_t table_stride);

// Causal GQA attention with the CPU attention()'s contract (kernels/ops.h):
// q, out [rows][n_heads][head_dim]; row r attends to keys [max(0, p - window
// + 1), p] (window <= 0: no window), p = positions[r]; head h reads kv head
// h / (n_heads / n_kv_heads). Keys are split into chunks of kAttentionChunk
// aligned to absolute positions; each chunk's partial softmax is merged in
// chunk order by one fixed formula (ADR 0028), so a query does identical
// arithmetic alone (decode), in a verify block or in a prefill chunk.
// With a workspace holding counters[rows · n_heads] (zero-filled once before
// the first use; every call leaves them zero) and at least
// attention_partial_floats(rows, n_heads, pool, table_stride, window) floats
// of partials (16-byte aligned), each chunk gets its own block
// (flash-decoding); without one (or with a smaller one), one block per (row,
// head) walks the chunks: the same bits either way. The workspace is in use
// until the call's work on `stream` completes. head_dim <= 512. softcap > 0
// caps each score s = scale · (q · k) to tanh(s / softcap) · softcap (Gemma 2,
// the CPU attention()'s rule); 0 leaves the scores as they are.
struct AttentionWorkspace {
  float* partials = nullptr;
  size_t partial_floats = 0;
  uint32_t* counters = nullptr;
  size_t counter_count = 0;
};
// Launch shapes, all the same bits (ADR 0028, 0043): `automatic` takes the
// tile shape for more than kAttentionTileMinRows rows when it fits (head_dim
// 64, 128 or 256), else split with a large enough workspace, else serial.
// `tile` (when it fits), `split` (with the workspace) and `serial` force one,
// for tests and measurements. `kv_split` (ADR 0087) is the split shape with
// one block per kv head instead of per q head (its q heads in the block's
// warps, the chunk staged once for them): automatic takes it instead of split
// for calls of TANDEM_CUDA_KV_SPLIT_ROWS or more rows (default 2: verify
// blocks and batched steps; one-row decode keeps split). out_bf16, when not
// null, also gets out rounded to bf16 (to_bf16's bits; ADR 0056): written by
// the split, kv split and serial kernels themselves, by a to_bf16 pass after
// the tile shape.
enum class AttentionShape { automatic, serial, split, tile, kv_split };
inline constexpr int64_t kAttentionTileMinRows = 16;
Status attention(const Stream& stream, const float* q, int64_t rows, int n_heads, const DeviceKvPool& pool,
                 const int32_t* positions, const int32_t* block_tables, int64_t table_stride, float scale,
                 int window, float* out, const AttentionWorkspace& workspace = {}, float softcap = 0.0f,
                 AttentionShape shape = AttentionShape::automatic, uint16_t* out_bf16 = nullptr);
size_t attention_partial_floats(int64_t rows, int n_heads, const DeviceKvPool& pool, int64_t table_stride,
                                int window);

// ---------------------------------------------------------------- glue of the model forward
// Element-wise (no reductions), so trivially batch-invariant. f32 unless stated.

// out[r] = f32(table[ids[r]]), table bf16 [vocab][dim]; ids must be below vocab (the caller
// validates). A negative id reads row 0: a chained step's token is the previous step's pick,
// -1 where it had none, and that step's rows are then discarded (ADR 0090).
Status embedding_bf16(const Stream& stream, const uint16_t* table, int64_t dim, const int32_t* ids,
                      int64_t rows, float* out);
// y[r][j] += bias[j], r < rows, j < n.
Status add_bias(const Stream& stream, float* y, const float* bias, int64_t rows, int64_t n);
// y[i] += x[i].
Status add_inplace(const Stream& stream, float* y, const float* x, int64_t count);
// Splits fused rows [rows][q_dim + 2 kv_dim] into q [rows][q_dim], k and v [rows][kv_dim].
Status split_qkv(const Stream& stream, const float* qkv, int64_t rows, int64_t q_dim, int64_t kv_dim,
                 float* q, float* k, float* v);
// out[r][i] = silu(gate_up[r][i]) * gate_up[r][inter + i], evaluated in double
// and rounded once (the CPU reference's formula).
Status swiglu_rows(const Stream& stream, const float* gate_up, int64_t rows, int64_t inter, float* out);
// out[i] = bf16(x[i]) (round to nearest even), as uint16_t bit patterns.
Status to_bf16(const Stream& stream, const float* x, uint16_t* out, int64_t count);
// out[r][t·pitch + i] = x[r][i] for i < k, 0 for k <= i < pitch, t < copies:
// the input of a GEMM over weights split into `copies` bf16 terms
// (kernels/bf16_terms.h, ADR 0083). pitch >= k.
Status repeat_cols(const Stream& stream, const float* x, int64_t rows, int64_t k, int copies, int64_t pitch,
                   float* out);
// A graphed step's row inputs, copied by its first kernel from `src` — page-locked
// host memory the device maps (PinnedBuffer::device_data) — instead of a DMA before
// the step (ADR 0090): the first `rows` ints of each of five arrays spaced `stride`
// apart, then `table_ints` ints from 5 * stride on (same offsets in dst), then
// rule_bytes (a multiple of 4) from rules_src to rules_dst. The step's later kernels
// start after it completes (it never releases them early).
Status stage_inputs(const Stream& stream, const int32_t* src, int32_t* dst, int64_t stride, int64_t rows,
                    int64_t table_ints, const void* rules_src, void* rules_dst, int64_t rule_bytes);
// dst[r] = src[indices[r]] for r < rows; rows of `dim` floats; indices on the device.
Status gather_rows(const Stream& stream, const float* src, const int32_t* indices, int64_t rows, int64_t dim,
                   float* dst);

// picks[r] = the pick of logits row r (`rows` rows of `vocab` floats) by
// rules[r] (kernels::PickRule; rules on the device, null: every row greedy):
// greedy, the lowest index of the largest value above -infinity (ADR 0070);
// sampled, the seeded sampler's Gumbel-max over logit / temperature with
// core/gumbel.h's noise (ADR 0072); -1 when no value is above -infinity.
// NaN is never picked. Each row is read once by pick_slices(vocab, rules != null) blocks;
// the last block of a row to finish combines their (score, index) pairs —
// the same pick in any order. The workspace holds rows * slices pairs and
// one counter per row, zero before the first call (the last block resets
// its row's counter).
struct PickWorkspace {
  double* best = nullptr;
  int32_t* index = nullptr;
  uint32_t* counters = nullptr;
  int64_t pairs = 0;  // entries of best and index
  int64_t rows = 0;   // counters
};
int64_t pick_slices(int64_t vocab, bool rules);
// picks_copy, when not null, gets the same picks too (a device buffer the next
// chained step's embedding reads while `picks` is the host's mapped memory, ADR 0090).
Status pick_rows(const Stream& stream, const float* logits, int64_t rows, int64_t vocab,
                 const PickRule* rules, int32_t* picks, const PickWorkspace& workspace,
                 int32_t* picks_copy = nullptr);

// ---------------------------------------------------------------- fused GEMM epilogues
// Epilogues over GemmPartials (fused.cu): each value is the slab sum, then
// + bias[j] when bias is not null, then exactly the unfused op's arithmetic,
// so the bits equal the unfused sequence's.
// x[r][j] += value(r, j): the residual add after the o and down projections.
Status residual_add_partials(const Stream& stream, const GemmPartials& p, const float* bias, float* x);
// The same residual add, then h[r] = rmsnorm(x[r]) with norm_weight, eps —
// rmsnorm()'s bits (one block per row, its reduction order): the norm before
// the next projection rides on the add. h may be the buffer p.slabs point into
// (one slice), not x. h_bf16, when not null, also gets h rounded to bf16 (to_bf16's
// bits): the next GEMM's input without a to_bf16 pass (ADR 0054).
// Calls of up to 64 rows of up to 4,096 values run one of two kernels with
// the same bits: one block of 1,024 threads a row, or a cluster of eight
// blocks a row (ADR 0091); by_knob picks by TANDEM_CUDA_ROW_NORM and
// TANDEM_CUDA_NORM_CLUSTER, the others name one (tests compare them).
enum class RowNormKernel { by_knob, one_block, cluster };
Status residual_add_rmsnorm_partials(const Stream& stream, const GemmPartials& p, const float* bias, float* x,
                                     const float* norm_weight, float eps, float* h,
                                     uint16_t* h_bf16 = nullptr,
                                     RowNormKernel kernel = RowNormKernel::by_knob);
// out[r][i] = swiglu_rows' formula on value(r, i) and value(r, inter + i); p.n = 2 · inter;
// out_bf16 as h_bf16 above.
Status swiglu_partials(const Stream& stream, const GemmPartials& p, const float* bias, float* out,
                       uint16_t* out_bf16 = nullptr);
// The fused q/k/v projection (p.n = (n_heads + 2 n_kv_heads) · head_dim):
// split_qkv, rope() on q and k (rope_positions, inv_freq, rotary_dim, layout),
// q to q_out [rows][n_heads][head_dim], k and v into the pool where kv_write
// puts them (positions, block tables).
Status qkv_rope_kv_write(const Stream& stream, const GemmPartials& p, const float* bias, int n_heads,
                         const DeviceKvPool& pool, const int32_t* rope_positions, const float* inv_freq,
                         int rotary_dim, RopeLayout layout, const int32_t* positions,
                         const int32_t* block_tables, int64_t table_stride, float* q_out);
// qkv_rope_kv_write then attention() (split shape), in one launch (ADR 0073):
// each attention block computes its query from the partials as
// qkv_rope_kv_write does, the blocks of a row's last chunk its own k and v
// rows, and one block per (row, kv head) writes those to the pool: the same
// bits in out, out_bf16 and the pool, without the q round trip and one
// launch fewer. news[r] (device, host-copied; null: 0 for every row) is how
// many rows before row r belong to its sequence: its keys at positions
// p − news[r] … p − 1, rows r − news[r] … r − 1 (a verify block; ADR 0081),
// which the blocks compute from those rows' partials as well; every other key
// is read from the pool (an earlier call wrote it). Where the
// split shape cannot run (the workspace is too small for
// attention_partial_floats, or TANDEM_CUDA_ATTENTION=serial|tile) it is the
// two calls, with q_fallback [rows][n_heads][head_dim] as their q
// (kInvalidArgument without one).
Status attention_from_qkv(const Stream& stream, const GemmPartials& qkv, const float* bias, int n_heads,
                          const DeviceKvPool& pool, const int32_t* rope_positions, const float* inv_freq,
                          int rotary_dim, RopeLayout layout, const int32_t* positions,
                          const int32_t* block_tables, int64_t table_stride, float scale, int window,
                          float* out, const AttentionWorkspace& workspace, float* q_fallback,
                          float softcap = 0.0f, uint16_t* out_bf16 = nullptr, const int32_t* news = nullptr);

}  // namespace tandem::kernels::gpu
