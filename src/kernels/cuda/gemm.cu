// gemm.cu — the batch-invariant bf16-weight GEMM, y = x·Wᵀ (kernels/cuda_ops.h):
// argument checks, the tile choice and the three shipping tile shapes. The
// kernel and its fixed reduction order: gemm_kernel.cuh.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "cuda/device_info.h"
#include "cuda/gemm_direct.cuh"
#include "cuda/gemm_kernel.cuh"
#include "cuda/gemm_tuning.h"
#include "cuda/gemm_wgmma.h"

namespace tandem::kernels::gpu {
namespace {

// Small-tile candidates (M <= 16), all the same mma chain per output, so the
// same bits (tested). The first H200 run found the old tile (variant 0)
// latency-bound: 128 KB of shared memory per block with f32 x left one block
// per SM. Variants 1-3 and 6 hold 8 x rows (M <= 8: decode, verify blocks of
// K <= 7) and fall back to 5 for 8 < M <= 16 (mid_tile_variant below since ADR 0085). Measured on the H200
// (docs/benchmarks.md, 2026-12-02): 3 is the fastest or within 5% on every
// forward shape of the 0.5B and 8B models (0.54-0.62 of the read ceiling on
// the large matrices, 0.16 for variant 0). TANDEM_CUDA_SMALL_TILE=N picks
// another (a tuning knob, read once).
// Variants 7 (32 x 8, 4 stages of 256 k: 512 contiguous bytes per weight row
// and stage) and 8 (variant 3 plus 4 warps that only queue copies) were
// measured next (2026-12-02 07:10 run, ADR 0042): 7 runs at 0.31-0.36 of
// read, 8 beats 3 on every matrix of >= 2^24 weights (8B: 0.44-0.64 against
// 0.43-0.61) and loses up to 10% on the small 0.5B ones. So the default picks
// by the matrix's size: 8 from 2^24 weights up, else 3 (all variants give the
// same bits, so a choice by shape cannot change a result).
// Variants 9-15 (ADR 0052, gemm_direct.cuh) load the weights straight into
// the mma registers: FN 16-row fragments per warp, U chunks of 32 k in flight
// per lane, PIPE: the next U issued before the current are used. They take
// any M (8 or 16 x rows per block by M). Measured (H200, 2026-12-02 13:13
// run, ADR 0052): 10, 11 and 15 stream the unsliced LM heads at 0.80-0.83 of
// read (8 at 0.63-0.64) and the 8B gate_up at 0.67 (0.57), but lose to 8 on
// the K-sliced matrices (8B down 0.47 against 0.62) and to 3 on the small
// ones; with 15 on every matrix of >= 2^24 weights the 8B and 1B decode got
// slower (145 -> 115, 566 -> 484 tok/s), with 15 on the 0.5B LM head only
// faster (575 -> 582). So the default uses 15 on the LM-head class only.
// Variants 9 and 12-14 were never the fastest on any forward matrix (that run's
// table in docs/benchmarks.md) and are retired (ADR 0056): their numbers stay
// reserved and pick the by-shape default, so 10, 11 and 15 keep theirs.
// Measured 2026-12-05 (docs/benchmarks.md, "Where decode's GEMM time goes"):
// one-warp blocks with a warp-private ring (16, 17) lost on every matrix and
// in the model (8B decode 140-145 against 178 tok/s) and are retired; 18 (15
// with x loaded with the weights) streams the 8B LM head at 0.89 of read
// against 0.83 alone, loses elsewhere, and on the LM head in the model moved
// the 8B decode by +1.5% in one call and -1.3% in the next: a knob only.
// 19 and 20 (ADR 0066) are the TMA wgmma kernel's m64 tiles (gemm_wgmma_tma.cu
// configurations 4 and 3: 64 x rows × 128 / 256 weight rows, the two consumer
// warpgroups splitting the weight rows); where the build or the device has no
// sm_90a, or x is not 16-byte aligned, they run 15. 20 is the default for the
// unsliced matrices of >= 2^25 weights since ADR 0069.
// 21 and 22 are 8 and 3 with 6 stages (5 of them, 80 KB of weights per block,
// issued before the wait on the previous kernel; 108 KB: two blocks per SM):
// how much of a matrix can stream while the glue kernel before it runs.
constexpr int kSmallTileVariants = 23;
constexpr int kM64Narrow = 19, kM64Wide = 20;
constexpr int kBySize = -2;  // the default: by the matrix's shape (by_size_variant)
constexpr int64_t kLargeMatrix = int64_t{1} << 24;

std::atomic<int> small_tile_choice{-1};  // -1: not yet read from the environment

// A tuning knob's variant: `choice` once set, else the environment's value
// (read once; empty, not a whole number or out of [0, count) means
// `fallback`: an empty TANDEM_CUDA_SMALL_TILE used to be read as variant 0),
// else `fallback`.
int tile_variant(std::atomic<int>& choice, const char* env, int count, int fallback,
                 bool (*retired)(int) = nullptr) {
  int v = choice.load(std::memory_order_relaxed);
  if (v != -1) return v;
  const char* e = std::getenv(env);
  char* end = nullptr;
  const long parsed = e != nullptr ? std::strtol(e, &end, 10) : 0;
  const bool number = e != nullptr && *e != '\0' && end != nullptr && *end == '\0';
  v = number && parsed >= 0 && parsed < count ? static_cast<int>(parsed) : fallback;
  if (v < 0 || v >= count || (retired != nullptr && retired(v))) v = fallback;
  choice.store(v, std::memory_order_relaxed);
  return v;
}

int small_tile_variant() {
  if (small_tile_choice.load(std::memory_order_relaxed) == -1) {  // first call: "W,L,S" / "L,S" mean by shape
    const char* e = std::getenv("TANDEM_CUDA_SMALL_TILE");
    if (e != nullptr && std::strchr(e, ',') != nullptr)
      small_tile_choice.store(kBySize, std::memory_order_relaxed);
  }
  return tile_variant(small_tile_choice, "TANDEM_CUDA_SMALL_TILE", kSmallTileVariants, kBySize,
                      small_tile_variant_retired);
}

// The by-size rule, a function of (n, k) only (ADR 0042, 0052, 0069): a
// matrix of >= 2^25 weights that gemm_slicing leaves whole (the LM heads of
// the 0.5B, 1B and 8B shapes, the 1B and 8B gate/up) takes kByShapeWhole (the
// m64 TMA wgmma tile with 256 weight rows), any other of >= 2^24 weights
// kByShapeSliced, a smaller one kByShapeSmall. Before ADR 0069 the first
// class was 15 (register-direct) from 2^27: variant 20 from 2^25 measured
// 1.02x (0.5B), 1.04x (1B) and 1.12x (8B) its B = 1 decode, alternated in
// one call (H100, 2026-12-05).
// TANDEM_CUDA_SMALL_TILE=W,L,S[,E] (read once) replaces the three and the
// whole class's lower bound 2^E (E >= 24; default 25); L,S means L,L,S,24.
// The sliced class takes 21 (8 with 6 stages) since ADR 0075: +3.4% on the 8B
// and +1.3% on the 1B B = 1 decode (H100, 2026-12-06), the same prefill.
constexpr int kByShapeWhole = 20, kByShapeSliced = 21, kByShapeSmall = 3;
constexpr int kWholeDirectLog2 = 25;
struct ByShape {
  int whole, sliced, small;
  int64_t whole_min;
};

ByShape read_by_shape() {
  ByShape b{kByShapeWhole, kByShapeSliced, kByShapeSmall, int64_t{1} << kWholeDirectLog2};
  const char* e = std::getenv("TANDEM_CUDA_SMALL_TILE");
  int v[4] = {0, 0, 0, kWholeDirectLog2};
  const int got = e != nullptr ? std::sscanf(e, "%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3]) : 0;
  if (got == 2) v[2] = v[1], v[1] = v[0], v[3] = 24;
  bool ok = got >= 2 && v[3] >= 24 && v[3] < 40;
  for (int i = 0; i < 3; ++i)
    ok = ok && v[i] >= 0 && v[i] < kSmallTileVariants && !small_tile_variant_retired(v[i]);
  if (ok) b = ByShape{v[0], v[1], v[2], int64_t{1} << v[3]};
  return b;
}

// TANDEM_CUDA_SLICED_OVER=V (read once; a measurement, never a bit): a sliced-class
// matrix whose blocks (64 weight rows x slices) outnumber two per multiprocessor
// — the sliced tile's residency — takes variant V instead, which fits three
// (3 or 8), so that no second wave of blocks streams alone at the end (the 8B
// qkv: 288 blocks for 264 slots). Unset or anything else: the sliced tile.
// Measured with 8 (H100, 2026-12-06): 8B decode 165.1 / 166.3 against 164.8 /
// 166.3 tok/s unset — no gain, so off.
int sliced_over_variant() {
  static const int v = [] {
    const char* e = std::getenv("TANDEM_CUDA_SLICED_OVER");
    const int got = e != nullptr ? std::atoi(e) : -1;
    return got == 3 || got == 8 ? got : -1;
  }();
  return v;
}

int by_size_variant(int64_t n, int64_t k) {
  static const ByShape b = read_by_shape();  // once (thread-safe static initialisation)
  if (n * k < kLargeMatrix) return b.small;
  const GemmSlicing plan = gemm_slicing(n, k);
  if (plan.slices == 1 && n * k >= b.whole_min) return b.whole;
  if (sliced_over_variant() >= 0 && (n + 63) / 64 * plan.slices > 2 * int64_t{current_multiprocessors()})
    return sliced_over_variant();
  return b.sliced;
}

// The variant that 9..16 x rows take where the pick holds 8 (1-3, 6-8, 21,
// 22): the m64 TMA wgmma tile with 256 weight rows (20; 5, 64 weight rows and
// 16 x rows, where it cannot run; ADR 0085). Measured on an H200 (2026-12-06,
// docs/benchmarks.md): a batch of 16 on the 8B 5.75 -> 5.42 ms a step, the 1B
// 1.26 -> 1.24; in bench_cuda_gemm (H100) its 8B down at M = 16 with bf16 x
// 45.4 us against 51.0 for 5. TANDEM_CUDA_MID_TILE=V (read once; a
// measurement, never a bit) picks another.
constexpr int kMidTileDefault = kM64Wide;
int mid_tile_variant() {
  static const int v = [] {
    const char* e = std::getenv("TANDEM_CUDA_MID_TILE");
    const int got = e != nullptr ? std::atoi(e) : -1;
    return got == 4 || got == 5 || got == 10 || got == 11 || got == 15 || got == 18 || got == kM64Narrow ||
                   got == kM64Wide
               ? got
               : kMidTileDefault;
  }();
  return v;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// The m64 TMA wgmma tile (variants 19, 20; wide modes 3, 4) where it can run.
bool m64_tile_runs(const void* x) { return wgmma_available() && aligned16(x); }

// 17..64 x rows (ADR 0060): the small tile's chain with 32 or 64 x rows per
// block, so the weights stream once per block row as at M <= 16, instead of
// the medium / large tiles (a 64 x 64 or a mostly empty 128-row wgmma block).
// TANDEM_CUDA_WIDE_TILE (read once) or set_wide_small_tile: 0 off (17+ rows
// take the medium / large tile, as before), 1 on, 2 on with 4 more warps that
// only queue copies (variant 8's idea), 3 / 4 the m64 TMA wgmma tile with 128 /
// 256 weight rows per block (variants 19 / 20; mode 1 where it cannot run).
// Every mode gives the same bits.
// Mode 1 was the default from ADR 0060 (H200, 2026-12-02: the 8-layer 8B
// step at 17 / 32 rows 5.11 / 6.61 -> 3.92 / 5.70 ms). Default 3 since ADR
// 0066 (H200, 2026-12-05 11:16: 8-layer 8B step at 17 / 32 / 48 / 64 rows
// 4.34 / 6.74 / 9.41 / 11.77 -> 3.64 / 5.42 / 8.23 / 10.84 ms; serving 64
// streams 4,420 -> 5,784 tok/s steady, cuBLAS 5,841).
constexpr int kWideModes = 5;
constexpr int kDefaultWide = 3;
constexpr int64_t kWideMaxRows = 64;
std::atomic<int> wide_choice{-1};

int wide_mode() { return tile_variant(wide_choice, "TANDEM_CUDA_WIDE_TILE", kWideModes, kDefaultWide); }

// The largest M the small tile takes under `automatic`.
int64_t small_tile_max_rows() { return wide_mode() != 0 ? kWideMaxRows : 16; }

template <bool F32X>
Status launch_wide(int mode, cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n,
                   int64_t k, float* y, int64_t slice) {
  if ((mode == 3 || mode == 4) && m64_tile_runs(x))
    return gemm_wgmma_tma(stream, x, F32X, m, w, n, k, y, slice, mode == 3 ? 4 : 3);
  // 64 weight rows, 4 compute warps, 3 stages of 128 k: 72 / 96 KB (bf16 x), 96 / 144 KB (f32 x).
  if (m <= 32)
    return mode == 2 ? launch<Tile<64, 32, 4, 1, 128, 3, F32X, 256>>(stream, x, m, w, n, k, y, slice)
                     : launch<Tile<64, 32, 4, 1, 128, 3, F32X>>(stream, x, m, w, n, k, y, slice);
  return mode == 2 ? launch<Tile<64, 64, 4, 1, 128, 3, F32X, 256>>(stream, x, m, w, n, k, y, slice)
                   : launch<Tile<64, 64, 4, 1, 128, 3, F32X>>(stream, x, m, w, n, k, y, slice);
}

// The shapes of the two small-tile variants the forward's K-sliced matrices take by
// default (3, 21), named once: launch_small and the residual-norm epilogue launch them.
template <bool F32X>
using SmallTile3 = Tile<64, 8, 4, 1, 128, 4, F32X>;
template <bool F32X>
using SmallTile21 = Tile<64, 8, 4, 1, 128, 6, F32X, 256>;

// The variant launch_small resolves `variant` to for this matrix (before its 9..16-row fallback).
int resolved_small_variant(int variant, int64_t n, int64_t k) {
  return variant == kBySize || small_tile_variant_retired(variant) ? by_size_variant(n, k) : variant;
}

template <bool F32X>
Status launch_small(int variant, cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n,
                    int64_t k, float* y, int64_t slice) {
  if (m > 16 && m <= kWideMaxRows && wide_mode() != 0)
    return launch_wide<F32X>(wide_mode(), stream, x, m, w, n, k, y, slice);
  variant = resolved_small_variant(variant, n, k);
  const bool eight = variant == 1 || variant == 2 || variant == 3 || variant == 6 || variant == 7 ||
                     variant == 8 || variant == 21 || variant == 22;
  if (eight && m > 8) {
    variant = mid_tile_variant();
    if ((variant == kM64Narrow || variant == kM64Wide) && !m64_tile_runs(x)) variant = 5;
  }
  if (variant == kM64Narrow || variant == kM64Wide) {
    if (m64_tile_runs(x))
      return gemm_wgmma_tma(stream, x, F32X, m, w, n, k, y, slice, variant == kM64Narrow ? 4 : 3);
    variant = 15;  // register-direct: the whole class's pick before ADR 0069
  }
  switch (variant) {
    case 0:  // 32 weight rows, 16 x rows, 2 warps, 4 stages of 256 k (128 KB with f32 x)
      return launch<Tile<32, 16, 2, 1, 256, 4, F32X>>(stream, x, m, w, n, k, y, slice);
    case 1:  // 8 x rows, 4 stages of 128 k (48 KB: 4 blocks per SM)
      return launch<Tile<32, 8, 2, 1, 128, 4, F32X>>(stream, x, m, w, n, k, y, slice);
    case 2:  // 8 x rows, 6 stages of 64 k (36 KB)
      return launch<Tile<32, 8, 2, 1, 64, 6, F32X>>(stream, x, m, w, n, k, y, slice);
    case 3:  // 64 weight rows, 4 warps, 8 x rows, 4 stages of 128 k (80 KB)
      return launch<SmallTile3<F32X>>(stream, x, m, w, n, k, y, slice);
    case 5:  // 64 weight rows, 4 warps, 16 x rows, 3 stages of 128 k (72 KB with f32 x)
      return launch<Tile<64, 16, 4, 1, 128, 3, F32X>>(stream, x, m, w, n, k, y, slice);
    case 6:  // 8 x rows, 8 stages of 128 k (96 KB)
      return launch<Tile<32, 8, 2, 1, 128, 8, F32X>>(stream, x, m, w, n, k, y, slice);
    case 7:  // 32 weight rows, 8 x rows, 4 stages of 256 k (96 KB with f32 x)
      return launch<Tile<32, 8, 2, 1, 256, 4, F32X>>(stream, x, m, w, n, k, y, slice);
    case 8:  // variant 3 with 4 more warps that only queue copies
      return launch<Tile<64, 8, 4, 1, 128, 4, F32X, 256>>(stream, x, m, w, n, k, y, slice);
    case 10:  // direct: launch_direct<FN, U, warps, PIPE>
      return launch_direct<1, 4, 4, true, F32X>(stream, x, m, w, n, k, y, slice);
    case 11:
      return launch_direct<2, 4, 4, false, F32X>(stream, x, m, w, n, k, y, slice);
    case 15:
      return launch_direct<1, 4, 2, true, F32X>(stream, x, m, w, n, k, y, slice);
    case 21:  // variant 8 with 6 stages (108 KB)
      return launch<SmallTile21<F32X>>(stream, x, m, w, n, k, y, slice);
    case 22:  // variant 3 with 6 stages (108 KB)
      return launch<Tile<64, 8, 4, 1, 128, 6, F32X>>(stream, x, m, w, n, k, y, slice);
    case 18:  // 15 with x loaded with the weights (XPRE)
      return launch_direct<1, 4, 2, true, F32X, true>(stream, x, m, w, n, k, y, slice);
    default:  // 4: 16 x rows, 4 stages of 128 k (64 KB: 3 blocks per SM)
      return launch<Tile<32, 16, 2, 1, 128, 4, F32X>>(stream, x, m, w, n, k, y, slice);
  }
}

// Large-tile candidates (ADR 0044), all the same mma chain per output, so the
// same bits (tested at M = 1..64 against the small tile and at large M):
// 0 is the first large tile (8 warps of 64 × 32); 1-4 use 64 × 64 warp tiles
// (fewer shared loads per mma) over 128 × 256, 256 × 128 and 128 × 128
// blocks; 4 is 2 with one 32-k chunk per stage (a barrier per 32 k instead
// of 64). 5-8 run the same chain through Hopper's wgmma (ADR 0053,
// gemm_wgmma.cu configurations 0-3: 128 x rows × 256 / 128 / 256 / 128
// weight rows; where the build or the device has no sm_90a, they run 2).
// 9-14 are the warp-specialised wgmma kernel (ADR 0055, gemm_wgmma_ws.cu
// configurations 0-5: a producer warpgroup and two consumer warpgroups on an
// mbarrier ring; 128 x rows × 256 / 256 / 256 / 128 / 256 / 256 weight rows;
// 11, 13, 14: pairs of blocks along M sharing the weight tile; without sm_90a they run 2).
// 15-17 are the TMA wgmma kernel over the relaid weights (ADR 0057,
// gemm_wgmma_tma.cu configurations 0-2: 128 x rows × 256 weight rows; the same
// with one tile's wgmmas in flight; 256 × 128; without sm_90a they run 2).
// TANDEM_CUDA_LARGE_TILE=N (read once) or set_large_tile_variant picks.
constexpr int kLargeTileVariants = 18;
// The default, by shape (ADR 0057, H200 run of 2026-12-02 18:59): 15 (0.78 of
// cuBLAS at 4096³, 1.55-2.33× variant 5 on every point), 17 for N >= 16384
// (the 8B gate_up: 1.12-1.17× 15). Before: 5 (ADRs 0053, 0055).
constexpr int kLargeByShape = -2;
constexpr int kDefaultLargeTile = 15, kWideLargeTile = 17;
constexpr int64_t kWideN = 16384;
std::atomic<int> large_tile_choice{-1};

int large_tile_variant() {
  return tile_variant(large_tile_choice, "TANDEM_CUDA_LARGE_TILE", kLargeTileVariants, kLargeByShape);
}

// Shared memory per block in the comments: bf16 x / f32 x.
template <bool F32X>
Status launch_large(int variant, cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n,
                    int64_t k, float* y, int64_t slice) {
  if (variant == kLargeByShape) variant = n >= kWideN ? kWideLargeTile : kDefaultLargeTile;
  if (variant >= 15 && variant <= 17 && wgmma_available())
    return gemm_wgmma_tma(stream, x, F32X, m, w, n, k, y, slice, variant - 15);
  if (variant >= 5 && variant <= 8 && wgmma_available())
    return gemm_wgmma(stream, x, F32X, m, w, n, k, y, slice, variant - 5);
  if (variant >= 9 && variant <= 14 && wgmma_available())
    return gemm_wgmma_ws(stream, x, F32X, m, w, n, k, y, slice, variant - 9);
  switch (variant) {
    case 1:  // 128 weight rows × 256 x rows, 8 warps of 64 × 64; 4 × 64 k / 4 × 32 k (192 / 160 KB)
      return launch<Tile<128, 256, 2, 4, F32X ? 32 : 64, 4, F32X>>(stream, x, m, w, n, k, y, slice);
    case 2:  // 256 × 128, 8 warps of 64 × 64; 4 × 64 k / 3 × 64 k (192 / 192 KB)
    case 5:  // (wgmma unavailable)
    case 6:
    case 7:
    case 8:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 14:
    case 15:
    case 16:
    case 17:
      return launch<Tile<256, 128, 4, 2, 64, F32X ? 3 : 4, F32X>>(stream, x, m, w, n, k, y, slice);
    case 3:  // 128 × 128, 4 warps of 64 × 64; 3 × 64 k / 4 × 32 k (96 / 96 KB: two blocks per SM)
      return launch<Tile<128, 128, 2, 2, F32X ? 32 : 64, F32X ? 4 : 3, F32X>>(stream, x, m, w, n, k, y,
                                                                              slice);
    case 4:  // 256 × 128, 8 warps of 64 × 64, 4 × 32 k (96 / 128 KB)
      return launch<Tile<256, 128, 4, 2, 32, 4, F32X>>(stream, x, m, w, n, k, y, slice);
    default:  // 0: 128 × 128, 8 warps of 64 × 32, 4 × 64 k / 3 × 64 k (128 / 144 KB)
      return launch<Tile<128, 128, 2, 4, 64, F32X ? 3 : 4, F32X>>(stream, x, m, w, n, k, y, slice);
  }
}

// Tile shapes: Tile<BN, BM, warps along N, warps along M, BK, stages, f32 x>.
template <bool F32X>
Status launch_tile(GemmTile tile, cudaStream_t stream, const void* x, int64_t m, const uint16_t* w, int64_t n,
                   int64_t k, float* y, int64_t slice = 0) {
  switch (tile) {
    case GemmTile::small:
      return launch_small<F32X>(small_tile_variant(), stream, x, m, w, n, k, y, slice);
    case GemmTile::medium:
      return launch<Tile<64, 64, 2, 2, 64, 4, F32X>>(stream, x, m, w, n, k, y, slice);
    case GemmTile::large:
    case GemmTile::automatic:
      break;
  }
  return launch_large<F32X>(large_tile_variant(), stream, x, m, w, n, k, y, slice);
}

// y[i] = slab 0 + slab 1 + ... in slab order (one fixed order for every m).
__global__ void sum_slices_kernel(const float* slabs, int slices, int64_t count, float* __restrict__ y) {
  pdl_enter();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    float s = slabs[i];
    for (int z = 1; z < slices; ++z) s = s + slabs[z * count + i];
    y[i] = s;
  }
}

// The automatic tile of a K-sliced call (ADRs 0055, 0057): counts the K
// slices as blocks, so that e.g. the 8B o and down projections (4 slices) at
// M = 512 take the large tile instead of the medium one (with the TMA tile
// 2.1× / 3.9× the medium tile there, H200 18:59 run); TANDEM_CUDA_TILE_SLICES=0
// (read once) keeps gemm_tile_for(m, n). Never a bit of the result (every
// tile gives the same bits).
GemmTile sliced_tile_for(int64_t m, int64_t n, int slices) {
  static const bool count_slices = [] {
    const char* e = std::getenv("TANDEM_CUDA_TILE_SLICES");
    return e == nullptr || std::atoi(e) != 0;
  }();
  const int sms = current_multiprocessors();
  if (!count_slices || m <= small_tile_max_rows()) return gemm_tile_for(m, n, sms);
  const int64_t large_blocks = ((n + 127) / 128) * ((m + 127) / 128) * slices;
  return large_blocks >= sms ? GemmTile::large : GemmTile::medium;
}

}  // namespace

int small_tile_variants() { return kSmallTileVariants; }
bool small_tile_variant_retired(int variant) {
  return variant == 9 || (variant >= 12 && variant <= 14) || variant == 16 || variant == 17;
}
void set_small_tile_variant(int variant) {
  small_tile_choice.store(variant >= 0 && variant < kSmallTileVariants && !small_tile_variant_retired(variant)
                              ? variant
                              : kBySize,
                          std::memory_order_relaxed);
}

int wide_small_tile() { return wide_mode(); }
void set_wide_small_tile(int mode) {
  wide_choice.store(mode >= 0 && mode < kWideModes ? mode : kDefaultWide, std::memory_order_relaxed);
}

int large_tile_variants() { return kLargeTileVariants; }
void set_large_tile_variant(int variant) {
  large_tile_choice.store(variant >= 0 && variant < kLargeTileVariants ? variant : kLargeByShape,
                          std::memory_order_relaxed);
}

const char* gemm_tile_name(GemmTile tile) {
  switch (tile) {
    case GemmTile::automatic:
      return "automatic";
    case GemmTile::small:
      return "small";
    case GemmTile::medium:
      return "medium";
    case GemmTile::large:
      return "large";
  }
  return "?";
}

GemmTile gemm_tile_for(int64_t m, int64_t n, int multiprocessors) {
  if (m <= small_tile_max_rows()) return GemmTile::small;
  const int64_t large_blocks = ((n + 127) / 128) * ((m + 127) / 128);
  return large_blocks >= multiprocessors ? GemmTile::large : GemmTile::medium;
}

Status check_gemm_args(const void* x, DType x_dtype, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                       const float* y) {
  if (x_dtype != DType::bf16 && x_dtype != DType::f32) {
    return invalid_argument("gemm_bf16w: activations must be bf16 or f32 (got f16)");
  }
  if (m < 0 || n <= 0 || k <= 0 || k % 8 != 0) {
    return invalid_argument(
        "gemm_bf16w: need m >= 0, n > 0, k > 0 and k % 8 == 0 (got m=" + std::to_string(m) +
        ", n=" + std::to_string(n) + ", k=" + std::to_string(k) + ")");
  }
  if (m > 65535LL * 16 || n > (1LL << 31)) {  // grid y holds at most 65535 tiles of >= 16 rows
    return invalid_argument("gemm_bf16w: m or n beyond the grid limit (m=" + std::to_string(m) +
                            ", n=" + std::to_string(n) + ")");
  }
  if (m > 0 && (!aligned16(x) || !aligned16(w) || !aligned16(y))) {
    return invalid_argument("gemm_bf16w: x, w and y must be 16-byte aligned device pointers");
  }
  return Status::Ok();
}

Status gemm_bf16w(const Stream& stream, const void* x, DType x_dtype, int64_t m, const uint16_t* w, int64_t n,
                  int64_t k, float* y, GemmTile tile) {
  TANDEM_RETURN_IF_ERROR(check_gemm_args(x, x_dtype, m, w, n, k, y));
  if (m == 0) return Status::Ok();
  if (tile == GemmTile::automatic) tile = gemm_tile_for(m, n, current_multiprocessors());
  return x_dtype == DType::f32 ? launch_tile<true>(tile, stream.handle(), x, m, w, n, k, y)
                               : launch_tile<false>(tile, stream.handle(), x, m, w, n, k, y);
}

// TANDEM_CUDA_SLICE_BLOCKS (read once; a measurement, default 512): gemm_slicing's
// block target. Another value changes the reduction order, so the bits, of
// every K-sliced matrix (still one order for every M within a process).
int64_t slice_target_blocks() {
  static const int64_t target = [] {
    const char* e = std::getenv("TANDEM_CUDA_SLICE_BLOCKS");
    const long v = e != nullptr ? std::strtol(e, nullptr, 10) : 0;
    return v >= 32 && v <= 4096 ? static_cast<int64_t>(v) : int64_t{512};
  }();
  return target;
}

// TANDEM_CUDA_SLICE_MIN (read once; a measurement, default 128; 64, 128, 256
// or 512): the K granule of gemm_slicing's slices. Another value changes the
// bits of every sliced matrix, as above. 128 since ADR 0075 (256 before): the
// 0.5B shape's qkv / o projections (k = 896) get 7 slices instead of 2, B = 1
// decode +10.7% (0.5B) and +3% (1B), 512-token prefill -8.8% / -2.9%, the 8B
// unchanged (H100, 2026-12-06).
int64_t slice_granule() {
  static const int64_t granule = [] {
    const char* e = std::getenv("TANDEM_CUDA_SLICE_MIN");
    const long v = e != nullptr ? std::strtol(e, nullptr, 10) : 0;
    return v == 64 || v == 128 || v == 256 || v == 512 ? static_cast<int64_t>(v) : int64_t{128};
  }();
  return granule;
}

// TANDEM_CUDA_SLICE_PLAN (read once; a measurement): "N:K:S[,N:K:S...]" — an
// n x k matrix listed takes S slices (as gemm_slicing cuts them: ⌈k / S⌉
// rounded up to the granule, as many as that needs, kMaxSlices at most)
// instead of the block-target rule, and before tuned_slices. Changes the bits
// of the matrices it names, like TANDEM_CUDA_SLICE_BLOCKS. Start-up
// (gpu_knobs.cpp) refuses a malformed plan or S outside 1..kMaxSlices; here a
// list that is not triples is no plan.
std::optional<int64_t> planned_slices(int64_t n, int64_t k) {
  static const std::vector<int64_t> plan = [] {
    const std::optional<std::string> e = env_string("TANDEM_CUDA_SLICE_PLAN");
    std::optional<std::vector<int64_t>> v = e ? parse_int_list(*e, ":,") : std::nullopt;
    return v && v->size() % 3 == 0 ? *v : std::vector<int64_t>{};
  }();
  for (size_t i = 0; i < plan.size(); i += 3)
    if (plan[i] == n && plan[i + 1] == k) return plan[i + 2];
  return std::nullopt;
}

// Shapes whose slice count was measured and beats the block-target rule's
// (ADR 0088): the qkv projection of Llama-3.1-8B / Mistral-7B / Qwen3-8B,
// 6144 x 4096, takes 5 (896-k slices, the last 512: 480 sliced-tile blocks)
// instead of 3 (288 blocks, a second wave of 24 on a 132-SM part's 264
// slots): B = 1 decode +3.2% on an H100. Constants, like the rule, so the
// bits do not depend on the device; TANDEM_CUDA_SLICE_PLAN overrides them.
std::optional<int64_t> tuned_slices(int64_t n, int64_t k) {
  struct Tuned {
    int64_t n, k, slices;
  };
  static constexpr Tuned kTuned[] = {{6144, 4096, 5}};
  for (const Tuned& t : kTuned)
    if (t.n == n && t.k == k) return t.slices;
  return std::nullopt;
}

GemmSlicing gemm_slicing(int64_t n, int64_t k) {
  // Enough blocks of the small tile (32 weight rows) to keep the SMs streaming
  // at M = 1, a constant (not the SM count, so the bits do not depend on the
  // device's size), slices of >= one granule of k in multiples of it.
  const int64_t kTargetBlocks = slice_target_blocks();
  const int64_t kMinSlice = slice_granule();
  constexpr int64_t kMaxSlices = 16;
  const int64_t blocks = (n + 31) / 32;
  std::optional<int64_t> planned = planned_slices(n, k);
  if (!planned) planned = tuned_slices(n, k);
  // Enough blocks at any target (the whole-matrix tile's class) unless planned.
  if (!planned && blocks >= 512) return {1, k};
  int64_t want = std::min<int64_t>(
      {planned ? *planned : (kTargetBlocks + blocks - 1) / blocks, k / kMinSlice, kMaxSlices});
  if (want <= 1) return {1, k};
  const int64_t slice = ((k + want - 1) / want + kMinSlice - 1) / kMinSlice * kMinSlice;
  const int64_t slices = (k + slice - 1) / slice;
  if (slices <= 1) return {1, k};
  return {static_cast<int>(slices), slice};
}

Expected<GemmPartials> gemm_bf16w_partials(const Stream& stream, const void* x, DType x_dtype, int64_t m,
                                           const uint16_t* w, int64_t n, int64_t k, float* y,
                                           float* workspace, size_t workspace_floats, GemmTile tile) {
  TANDEM_RETURN_IF_ERROR(check_gemm_args(x, x_dtype, m, w, n, k, y));
  const GemmSlicing plan = gemm_slicing(n, k);
  if (m == 0) return GemmPartials{y, 1, m, n};
  if (plan.slices == 1) {
    TANDEM_RETURN_IF_ERROR(gemm_bf16w(stream, x, x_dtype, m, w, n, k, y, tile));
    return GemmPartials{y, 1, m, n};
  }
  const size_t need = static_cast<size_t>(plan.slices) * static_cast<size_t>(m * n);
  if (workspace == nullptr || workspace_floats < need || (reinterpret_cast<uintptr_t>(workspace) & 15u) != 0)
    return invalid_argument("gemm_bf16w_sliced: need a 16-byte aligned workspace of " + std::to_string(need) +
                            " floats (got " + std::to_string(workspace_floats) + ")");
  if (tile == GemmTile::automatic) tile = sliced_tile_for(m, n, plan.slices);
  TANDEM_RETURN_IF_ERROR(
      x_dtype == DType::f32
          ? launch_tile<true>(tile, stream.handle(), x, m, w, n, k, workspace, plan.slice)
          : launch_tile<false>(tile, stream.handle(), x, m, w, n, k, workspace, plan.slice));
  return GemmPartials{workspace, plan.slices, m, n};
}

Status gemm_bf16w_sliced(const Stream& stream, const void* x, DType x_dtype, int64_t m, const uint16_t* w,
                         int64_t n, int64_t k, float* y, float* workspace, size_t workspace_floats,
                         GemmTile tile) {
  Expected<GemmPartials> p =
      gemm_bf16w_partials(stream, x, x_dtype, m, w, n, k, y, workspace, workspace_floats, tile);
  if (!p.ok()) return p.status();
  if (p->slices == 1) return Status::Ok();
  const int64_t count = m * n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, 65535 * 8));
  return launch_kernel("gemm_bf16w_sliced (sum of slices)", sum_slices_kernel, dim3(blocks), dim3(256), 0,
                       stream.handle(), p->slabs, p->slices, count, y);
}

namespace {
// The small-tile variant (21 or 3) that runs a call with the residual-norm epilogue, or 0 where
// it cannot: f32 x, more than kResidualNormMaxRows rows, n not a multiple of 4 (float4 rows) or
// over 16,384 (the row of x the epilogue stages in the 72 / 108 KB ring), one slice, a tile
// class other than small, or another variant (a TANDEM_CUDA_SMALL_TILE choice).
int residual_norm_variant(DType x_dtype, int64_t m, int64_t n, int64_t k) {
  if (x_dtype != DType::bf16 || m < 1 || m > kResidualNormMaxRows || n < 4 || n % 4 != 0 || n > 16384)
    return 0;
  const GemmSlicing plan = gemm_slicing(n, k);
  if (plan.slices < 2 || sliced_tile_for(m, n, plan.slices) != GemmTile::small) return 0;
  const int variant = resolved_small_variant(small_tile_variant(), n, k);
  return variant == 21 || variant == 3 ? variant : 0;
}
}  // namespace

bool gemm_residual_rmsnorm_fits(DType x_dtype, int64_t m, int64_t n, int64_t k) {
  return residual_norm_variant(x_dtype, m, n, k) != 0;
}

Status gemm_bf16w_residual_rmsnorm(const Stream& stream, const void* x, DType x_dtype, int64_t m,
                                   const uint16_t* w, int64_t n, int64_t k, float* workspace,
                                   size_t workspace_floats, const ResidualNorm& norm) {
  TANDEM_RETURN_IF_ERROR(check_gemm_args(x, x_dtype, m, w, n, k, workspace));
  const int variant = residual_norm_variant(x_dtype, m, n, k);
  if (variant == 0)
    return invalid_argument("gemm_bf16w_residual_rmsnorm: not for this call (" + std::to_string(m) + " x " +
                            std::to_string(n) + " x " + std::to_string(k) + ")");
  if (norm.x == nullptr || norm.weight == nullptr || norm.h == nullptr || norm.ticket == nullptr)
    return invalid_argument("gemm_bf16w_residual_rmsnorm: need x, the norm's weight, h and a ticket");
  const GemmSlicing plan = gemm_slicing(n, k);
  const size_t need = static_cast<size_t>(plan.slices) * static_cast<size_t>(m * n);
  if (workspace_floats < need)
    return invalid_argument("gemm_bf16w_residual_rmsnorm: need a workspace of " + std::to_string(need) +
                            " floats (got " + std::to_string(workspace_floats) + ")");
  return variant == 21
             ? launch<SmallTile21<false>, true>(stream.handle(), x, m, w, n, k, workspace, plan.slice, norm)
             : launch<SmallTile3<false>, true>(stream.handle(), x, m, w, n, k, workspace, plan.slice, norm);
}

}  // namespace tandem::kernels::gpu
