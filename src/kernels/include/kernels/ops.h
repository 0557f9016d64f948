// kernels/ops.h — the CPU op contract every layer above calls.
//
// Batch invariance (docs/adr/0001-batch-invariance.md): every op computes each
// output element with a floating-point reduction order that depends only on
// the reduction length and absolute positions — never on the number of rows
// M, on which rows share the call, on the thread count, or on how a prompt was
// chunked. Threads split output columns, rows or heads, never a reduction.
// The only exception is GemmMode::splitk, an explicit non-invariant option.
//
// Variants: each op has a scalar reference and AVX2 / AVX-512 variants. The
// variant is chosen by Ctx::isa (default: active_isa(), the best this CPU
// supports, lowered by select_isa(): the app passes TANDEM_KERNELS's value
// at start-up; the kernels read no environment). Variants agree
// with the reference within per-precision tolerances, not bitwise; each
// variant is bitwise invariant with itself.
//
// Units: activations f32, row-major. Weights f32/bf16/f16 or a GGUF block
// type (q8_0, q4_0, q5_0, q4_k, q5_k, q6_k; docs/quantized.md, ADR 0013). Positions are
// absolute token positions (0-based). No op allocates on the hot path except
// where noted. Errors: ops CHECK their preconditions (shapes are the model
// layer's responsibility, validated at load time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace tandem::kernels {

// Element types. The quantized ones are GGUF/ggml block formats, stored
// byte for byte as GGUF files hold them: a row of k elements is k /
// dtype_block_elems() blocks of dtype_block_bytes() bytes.
//   q8_0: 32 elements, f16 d + 32 int8 q            -> q·d
//   q4_0: 32 elements, f16 d + 16 bytes of nibbles  -> (q−8)·d
//   q5_0: 32 elements, f16 d + u32 fifth bits + 16 bytes of nibbles -> (q−16)·d
//   q4_k: 256 elements, f16 d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles
//   q5_k: as q4_k plus 32 bytes of high bits (5-bit q)
//   q6_k: 256 elements, 128 bytes low nibbles, 64 bytes high 2 bits, 16 int8 scales, f16 d
// (Appended in order: the values are never stored, but keep them stable.)
enum class DType : uint8_t { f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q5_0 };
// Bytes per element of a float type; CHECKs that `dtype` is not quantized
// (block types have no per-element size: use dtype_row_bytes).
size_t dtype_size(DType dtype);
// "f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k".
const char* dtype_name(DType dtype);
bool dtype_is_quantized(DType dtype);
// Elements per block (1 for float types, 32 for q8_0/q4_0/q5_0, 256 for the K types).
int64_t dtype_block_elems(DType dtype);
// Bytes per block (the element size for float types).
size_t dtype_block_bytes(DType dtype);
// Bytes of one row of k elements; CHECKs k % dtype_block_elems(dtype) == 0.
size_t dtype_row_bytes(DType dtype, int64_t k);
// OK when a [n][k] matrix of `dtype` can be stored and packed (n, k > 0 and
// k a multiple of the block); otherwise InvalidArgument naming the dtype, k
// and the block size. The loaders call this before pack / to_f32 / embedding.
Status check_matrix_shape(DType dtype, int64_t n, int64_t k);

enum class Isa : uint8_t { scalar = 0, avx2 = 1, avx512 = 2 };
const char* isa_name(Isa isa);
bool isa_supported(Isa isa);
// The ISA Ctx{} starts with: best_supported_isa() lowered (never raised) by
// the last select_isa().
Isa active_isa();
// Lowers active_isa() to `limit` (a limit above best_supported_isa() selects
// the best). Start-up only, before other threads run kernels: the app calls
// it once with TANDEM_KERNELS's value (isa_limit_from_env).
void select_isa(Isa limit);
// The best ISA this CPU supports (ignores select_isa()).
Isa best_supported_isa();
// What TANDEM_KERNELS=`value` selects when the CPU's best is `best`: the
// named ISA (scalar|avx2|avx512, trimmed, case-insensitive) if it is not
// above `best`, else `best`. nullptr, empty or unrecognised -> `best`.
// A pure parser: the caller (the app) reads the environment.
Isa isa_limit_from_env(const char* value, Isa best);

// Matmul reduction policy. invariant: one fixed-order accumulation per
// output, identical for every M (the default). splitk: for M > 1 the K
// dimension is split into partial sums whose count depends on M and the
// thread count — faster when N is too narrow to keep every core busy, and
// NOT batch-invariant (the exactness probe detects it). M == 1 always takes
// the invariant path, so a row's bits differ between alone and in a batch.
// Details and measurements: docs/kernels.md, docs/benchmarks.md.
enum class GemmMode : uint8_t { invariant, splitk };
const char* gemm_mode_name(GemmMode mode);
// There is no process-wide mode: each Ctx carries its own (default
// invariant); model::Forward holds the mode its owner configured.
// Parses "invariant" / "splitk" (trimmed, case-insensitive); false if neither.
bool parse_gemm_mode(const char* text, GemmMode* mode);

// What a bf16 weight matrix multiplies (ADR 0082). f32: the activations as
// they are, the f32 FMA chain. bf16: each activation row rounded to bf16
// (round to nearest even; a denormal becomes a zero of its sign, as
// vcvtneps2bf16 does) and the bf16 pairs chain (kernel_table.h) —
// vdpbf16ps's arithmetic, the numerics of llama.cpp's bf16 path and of
// transformers' bf16 matmuls, with 2x the products per instruction on a CPU
// with AVX512_BF16. Either is batch invariant; f32 / f16 / quantized weights
// are unaffected.
enum class Activations : uint8_t { f32, bf16 };
const char* activations_name(Activations a);
// The mode Ctx{} starts with: f32 until select_activations() (start-up only,
// like select_isa; the app passes TANDEM_CPU_ACTIVATIONS's value).
Activations active_activations();
void select_activations(Activations a);
// Whether bf16 activations run natively here: the AVX-512 kernels are active
// and the CPU has AVX512_BF16 (elsewhere they run the scalar reference).
bool bf16_activations_native();
// Parses "f32" / "bf16" (trimmed, case-insensitive); false if neither.
bool parse_activations(const char* text, Activations* a);

// How to run one op: which thread pool (nullptr = the calling thread only),
// which ISA variant, which matmul policy, what bf16 weights multiply.
struct Ctx {
  ThreadPool* pool = nullptr;
  Isa isa = active_isa();
  GemmMode gemm = GemmMode::invariant;
  Activations act = active_activations();
};

// ---------------------------------------------------------------- matmul
// A weight matrix W of shape [n, k] (n outputs, k inputs: the layout Hugging
// Face stores for nn.Linear), repacked once at load into the layout the
// kernels stream. Owns its storage.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // Copies/repacks `data` (row-major [n][k] of `dtype`). The packed weights
  // keep their precision (bf16 stays bf16). For a quantized dtype `data` is n
  // rows of dtype_row_bytes(dtype, k) bytes exactly as GGUF stores them;
  // the caller checks the shape first (check_matrix_shape; a bad shape here
  // is a CHECK failure).
  static PackedMatrix pack(const void* data, DType dtype, int64_t n, int64_t k);
  // A matrix whose rows are the parts' rows in order (n = the sum, equal k),
  // each part keeping its own block type: a fused q/k/v or gate/up whose GGUF
  // tensors differ in type (llama.cpp's Q4_K_M mixes q5_0 and q8_0) stays
  // quantized instead of being widened (ADR 0032). matmul runs each part over
  // its own columns of y, so an output's bits are those of its part alone.
  // CHECKs: at least one part, all of block types, equal k.
  static PackedMatrix stack(std::vector<PackedMatrix> parts);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  // A stacked matrix reports its first part's dtype; parts() has them all.
  DType dtype() const { return dtype_; }
  const std::vector<PackedMatrix>& parts() const { return parts_; }
  // Bytes of weight data one full pass over the matrix reads (quantized: the
  // packed blocks incl. the unpacked K-quant scales, padding excluded).
  size_t weight_bytes() const { return weight_bytes_; }
  const uint8_t* data() const { return data_.data(); }
  // Bytes at data(), padding included (a quantized matrix's last group of 16
  // outputs is whole): what a device copy of the packed layout takes. 0 for
  // a stacked matrix (see parts()) and after release_data().
  size_t data_bytes() const { return data_.size(); }
  // Writes the matrix back in row-major [n][k] of dtype() (the inverse of
  // pack; n * k * dtype_size bytes), e.g. to upload it to a device. Float
  // dtypes only (CHECKed).
  void unpack(void* dst) const;
  // Frees the packed weights (and the parts'), keeping n, k, dtype and
  // weight_bytes: for a model whose forward runs on a device that holds its
  // own copy (ADR 0067). Afterwards data() is null and the matrix must not
  // reach matmul or unpack.
  void release_data();
  bool released() const { return released_; }

 private:
  int64_t n_ = 0, k_ = 0;
  DType dtype_ = DType::f32;
  size_t weight_bytes_ = 0;
  AlignedBuffer<uint8_t> data_;
  std::vector<PackedMatrix> parts_;  // stacked: the row blocks; data_ is empty
  bool released_ = false;
};

// y[m][n] = sum_k x[m][k] * W[n][k]   (x: [m][k] with row stride k; y: [m][n])
// Invariant mode: each output is one FMA chain over k = 0..K-1 in order
// (lanes across N, up to 8 rows sharing each weight load); threads split
// N in 64-column panels. Allocates only in splitk mode (scratch that grows
// to the largest call).
// Quantized W (ADR 0013): each row of x is first quantized to int8 per
// 32-element block (row-local, deterministic); each output is one f32 chain
// over the blocks in order, each block's integer dot product exact — so
// every ISA gives the same bits, for every M and thread count. Scratch for
// the quantized rows is thread_local and grows to the largest call.
void matmul(const Ctx& ctx, const float* x, int64_t m, const PackedMatrix& w, float* y);

// ---------------------------------------------------------------- row-wise ops
// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight   (in place allowed)
void rmsnorm(const Ctx& ctx, const float* x, const float* weight, float* y, int64_t rows, int64_t dim,
             float eps);
// Softmax of each row, in place.
void softmax(const Ctx& ctx, float* x, int64_t rows, int64_t n);
// out[i] = silu(gate[i]) * up[i]
void swiglu(const Ctx& ctx, const float* gate, const float* up, float* out, int64_t count);
// out[i] = gelu_tanh(gate[i]) * up[i]
void gelu_tanh_gate(const Ctx& ctx, const float* gate, const float* up, float* out, int64_t count);
// y[i] += x[i]
void add_inplace(const Ctx& ctx, float* y, const float* x, int64_t count);
// y[r][j] += bias[j]
void add_bias(const Ctx& ctx, float* y, const float* bias, int64_t rows, int64_t n);
// out[r] = table[ids[r]] converted to f32 (table: [vocab][dim] of dtype;
// quantized tables are dequantized row by row, as to_f32).
void embedding(const Ctx& ctx, const void* table, DType dtype, int64_t dim, const int32_t* ids, int64_t rows,
               float* out);
// Index of the largest value (lowest index on ties; NaN never wins).
int32_t argmax(const float* x, int64_t n);
// The sampler's greedy pick of an unprocessed row: argmax(x, n) when that
// value is above -infinity, else -1 (every entry -infinity or NaN, or n <= 0).
// The GPU's pick_rows gives the same index for a greedy rule (ADR 0070).
int32_t greedy_pick(const float* x, int64_t n);
// How a forward may pick an output row's token itself (ADR 0070, 0072).
// temperature 0: greedy_pick. Above 0: the seeded sampler's Gumbel-max
// (ADR 0002) of the row divided by the temperature and nothing else — the
// lowest id i with the largest double(x_i / temperature) + G(u(seed, position,
// i)) (core/gumbel.h) among the values above -infinity, -1 if none: what
// sampling::Sampler::pick gives a request with only a temperature set.
// needs_row: no pick (-1); the caller needs the row itself (its sampler
// processes it, or it wants logprobs), and only such rows come back.
struct PickRule {
  float temperature = 0.0f;
  uint32_t needs_row = 0;  // 0 or 1 (a 32-bit field: the device copies the struct as is)
  uint64_t seed = 0;
  int64_t position = 0;
};
// Converts a weight vector (e.g. a norm weight) to f32. Quantized dtypes are
// dequantized (count a multiple of the block), bit-exact to gguf-py's
// gguf.quants.dequantize.
void to_f32(const void* src, DType dtype, int64_t count, float* dst);
// Quantizes `count` f32 values (a multiple of the block) into GGUF blocks of
// `dtype`: q8_0, q4_0 bit-identical to gguf-py's gguf.quants.quantize, and
// q8_0, q4_0, q5_0, q4_k, q6_k bit-identical to llama.cpp's reference
// quantizers (llama_model_quantize without an imatrix; ADR 0046). CHECKs other dtypes.
void quantize(const float* src, DType dtype, int64_t count, void* dst);

// ---------------------------------------------------------------- RoPE
enum class RopeLayout : uint8_t {
  neox,         // rotate pairs (i, i + rotary_dim/2): Llama/Qwen/Mistral in HF
  interleaved,  // rotate pairs (2i, 2i+1): GPT-J / original Meta layout
};
struct RopeScaling {
  enum class Kind : uint8_t { none, linear, llama3 } kind = Kind::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;         // llama3
  double high_freq_factor = 4.0;        // llama3
  double original_max_position = 8192;  // llama3
};
// inv_freq[i] for i in [0, rotary_dim/2), as transformers computes them.
std::vector<float> rope_inv_freq(int rotary_dim, double theta, const RopeScaling& scaling);
// Rotates the first rotary_dim dims of each head of each row in place.
// x: [rows][n_heads][head_dim]; positions[r] is row r's absolute position.
void rope(const Ctx& ctx, float* x, int64_t rows, int n_heads, int head_dim, const int32_t* positions,
          const float* inv_freq, int rotary_dim, RopeLayout layout);

// ---------------------------------------------------------------- attention
// Keys are visited in chunks of kAttentionChunk aligned to absolute positions
// (0..C-1, C..2C-1, …) with the online-softmax merge in chunk order, so a
// query at position p does identical arithmetic alone, in a verify block or
// in a prefill chunk.
inline constexpr int kAttentionChunk = 32;

// One layer's paged K or V pool: block b, slot s, kv head h starts at
// base + ((b * tokens_per_block + s) * n_kv_heads + h) * head_dim.
struct KvPool {
  float* k = nullptr;
  float* v = nullptr;
  int32_t tokens_per_block = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

// Writes K/V rows for new tokens into the pool. k_new/v_new: [rows][n_kv_heads][head_dim];
// row r goes to position positions[r] of the sequence whose block table is block_tables[r].
void kv_write(const KvPool& pool, const float* k_new, const float* v_new, int64_t rows,
              const int32_t* positions, const int32_t* const* block_tables);

// Causal GQA attention. q: [rows][n_heads][head_dim]; out: same shape. Row r
// attends to keys at positions [max(0, p - window + 1), p] (window <= 0: no
// window) of the sequence whose block table is block_tables[r], p =
// positions[r]; those keys must already be written. Head h reads kv head
// h / (n_heads / n_kv_heads). Threads split (row, head) pairs. softcap > 0
// caps each score s = scale * (q . k) to tanh(s / softcap) * softcap before
// the softmax (Gemma 2); 0 leaves scores as they are.
void attention(const Ctx& ctx, const float* q, int64_t rows, int n_heads, const KvPool& pool,
               const int32_t* positions, const int32_t* const* block_tables, float scale, int window,
               float* out, float softcap = 0.0f);

}  // namespace tandem::kernels
