// pick.cu — each logits row's token picked on the device (kernels/cuda_ops.h):
// greedy (ADR 0070) or the seeded sampler's Gumbel-max at a temperature
// (ADR 0072), so a decode step downloads one int32 per row instead of the
// whole vocabulary and the host does not scan it.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <string>

#include "core/gumbel.h"
#include "cuda/cuda_check.h"
#include "cuda/launch.cuh"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kPickThreads = 256;
constexpr int kPickWarps = kPickThreads / 32;
// Values per block: greedy, 32 a thread (a compare each); with rules, 4 a
// thread — a sampled value costs two logarithms, so the row is spread over
// ~150 blocks (the whole GPU at B = 1) instead of ~19.
constexpr int64_t kGreedySlice = 8192;
constexpr int64_t kSampledSlice = 1024;

// (v, i) becomes the better of itself and (ov, oi): the larger score, the
// lower index on a tie. A pair holds index -1 exactly when its score is
// -infinity (only a score above the running best is ever taken), so two such
// pairs never trade, and +0 == -0 ties go to the lower index as the host's
// sequential "x[i] > best" scan does. Scores are doubles: a greedy row's
// floats convert exactly (same order, same ties).
__device__ __forceinline__ void take_better(double& v, int& i, double ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

// The block's best pair; thread 0 gets it.
__device__ __forceinline__ void block_best(double& v, int& i, double* best_scratch, int* index_scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    take_better(v, i, __shfl_xor_sync(0xffffffffu, v, offset), __shfl_xor_sync(0xffffffffu, i, offset));
  if ((threadIdx.x & 31) == 0) {
    best_scratch[threadIdx.x >> 5] = v;
    index_scratch[threadIdx.x >> 5] = i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kPickWarps; ++w) take_better(v, i, best_scratch[w], index_scratch[w]);
  }
}

// Grid (slices, rows): block (s, r) finds the best pair of row r's indices
// [s * slice, (s + 1) * slice); the row's last block to finish
// (its counter) combines the row's pairs into picks[r]. A value's score:
// greedy, the value itself; sampled, double(value / T) + G(u(seed, position,
// index)) — the host Sampler's score, which it computes for every id that can
// win (its pruning skips only ids that provably cannot). NaN and -infinity
// are never taken (NaN > v is false); a row with nothing above -infinity, or
// whose rule needs the row, gets -1.
__global__ void __launch_bounds__(kPickThreads)
    pick_kernel(const float* logits, int64_t vocab, int64_t slice, const PickRule* __restrict__ rules,
                int32_t* __restrict__ picks, PickWorkspace ws, int32_t* __restrict__ picks_copy) {
  __shared__ double best_scratch[kPickWarps];
  __shared__ int index_scratch[kPickWarps];
  __shared__ bool last;
  pdl_launch_dependents();
  const int64_t slices = gridDim.x, row = blockIdx.y;
  // The rules are the step's inputs, which only a host-to-device copy writes (launch.cuh).
  const PickRule rule = rules != nullptr ? rules[row] : PickRule{};
  pdl_wait();
  const float* x = logits + row * vocab;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * slice;
  const int64_t end = begin + slice < vocab ? begin + slice : vocab;
  double v = -INFINITY;
  int i = -1;
  if (rule.needs_row != 0) {
    // No pick: the row goes to the host (-1).
  } else if (rule.temperature > 0.0f) {
    const uint64_t key = gumbel::position_key(rule.seed, rule.position);
    for (int64_t j = begin + threadIdx.x; j < end; j += kPickThreads) {
      const float value = __fdiv_rn(x[j], rule.temperature);  // apply_temperature's l /= T
      if (!(value > -INFINITY)) continue;                     // masked or NaN: never picked
      const double score =
          static_cast<double>(value) + gumbel::gumbel_of(gumbel::uniform_from(key, static_cast<int32_t>(j)));
      if (score > v) {  // this thread's indices rise: its first hit of a score is its lowest
        v = score;
        i = static_cast<int>(j);
      }
    }
  } else {
#pragma unroll 8
    for (int64_t j = begin + threadIdx.x; j < end; j += kPickThreads) {
      const float value = x[j];
      if (value > v) {
        v = value;
        i = static_cast<int>(j);
      }
    }
  }
  block_best(v, i, best_scratch, index_scratch);
  double* pair_best = ws.best + row * slices;
  int32_t* pair_index = ws.index + row * slices;
  if (threadIdx.x == 0) {
    pair_best[blockIdx.x] = v;
    pair_index[blockIdx.x] = i;
    __threadfence();  // the pair is visible before the count says so
    last = atomicAdd(ws.counters + row, 1u) == static_cast<uint32_t>(slices - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  v = -INFINITY;
  i = -1;
  for (int64_t s = threadIdx.x; s < slices; s += kPickThreads)
    take_better(v, i, __ldcg(pair_best + s), __ldcg(pair_index + s));
  block_best(v, i, best_scratch, index_scratch);
  if (threadIdx.x == 0) {
    picks[row] = i;
    if (picks_copy != nullptr) picks_copy[row] = i;
    ws.counters[row] = 0;  // ready for the next call
  }
}

}  // namespace

int64_t pick_slices(int64_t vocab, bool rules) {
  const int64_t slice = rules ? kSampledSlice : kGreedySlice;
  return vocab <= 0 ? 0 : (vocab + slice - 1) / slice;
}

Status pick_rows(const Stream& stream, const float* logits, int64_t rows, int64_t vocab,
                 const PickRule* rules, int32_t* picks, const PickWorkspace& workspace, int32_t* picks_copy) {
  if (rows < 0 || rows > 65535 || vocab <= 0 || vocab > INT_MAX)
    return invalid_argument("pick_rows: need 0 <= rows <= 65535 and 0 < vocab < 2^31 (got rows " +
                            std::to_string(rows) + ", vocab " + std::to_string(vocab) + ")");
  if (rows == 0) return Status::Ok();
  const int64_t slices = pick_slices(vocab, rules != nullptr);
  if (workspace.rows < rows || workspace.pairs < rows * slices || workspace.best == nullptr ||
      workspace.index == nullptr || workspace.counters == nullptr)
    return invalid_argument("pick_rows: the workspace holds " + std::to_string(workspace.pairs) +
                            " pairs and " + std::to_string(workspace.rows) + " counters; " +
                            std::to_string(rows) + " rows of " + std::to_string(vocab) + " need " +
                            std::to_string(rows * slices) + " and " + std::to_string(rows));
  return launch_kernel("pick_rows", pick_kernel,
                       dim3(static_cast<unsigned>(slices), static_cast<unsigned>(rows)), dim3(kPickThreads),
                       0, stream.handle(), logits, vocab, rules != nullptr ? kSampledSlice : kGreedySlice,
                       rules, picks, workspace, picks_copy);
}

}  // namespace tandem::kernels::gpu
