// handoff_latency.cu — what one kernel boundary costs a dependent chain of
// small kernels (issue 15: B = 1 decode is ~7 dependent kernels per layer),
// and what a flag handoff would cost instead.
//
// A CUDA graph of L kernels; kernel i reads kernel i - 1's whole output
// vector (every block reads values other blocks wrote) and writes its own.
// Per kernel (µs) = a replay's time / L, for three ways to hand a result on:
//   plain  no programmatic dependent launch: kernel i starts after i - 1 ends;
//   pdl    launched programmatically (ADR 0041): launch_dependents first, then
//          griddepcontrol.wait before the first dependent read — tandem today;
//   flag   launched programmatically, but the dependent read waits for a
//          counter instead: each block of kernel i - 1 stores its part,
//          fences and adds 1; kernel i's blocks spin (acquire) until the
//          counter reaches this replay's count, and call griddepcontrol.wait
//          only before they exit (launch.cuh's contract still holds).
// And "pdl + stream": the same pdl chain with a weight-streaming kernel's
// blocks interleaved (a GEMM's role), to see whether spinning blocks slow it.
//
// No tandem library; the target bench_handoff_latency (bench/cuda.cmake).
//   bench_handoff_latency [--kernels L] [--replays R]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check_or_exit.cuh"

namespace {

constexpr int kValues = 4096;  // one hidden row of the 8B shape

enum class Mode { plain, pdl, flag };

__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void launch_next() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Kernel `index` of the chain: out[j] = f(in[j], in[(j * 7 + 1) % N]) for its
// block's share of j; counters[index] counts the blocks done, across replays.
template <Mode M>
__global__ void step_kernel(const float* __restrict__ in, float* __restrict__ out, uint32_t* counters,
                            int index, const uint32_t* epoch, uint32_t producer_blocks) {
  if (M != Mode::plain) launch_next();
  if (M == Mode::pdl) grid_wait();
  if (M == Mode::flag && index > 0) {
    if (threadIdx.x == 0) {
      const uint32_t target = *epoch * producer_blocks;  // the host writes it before the replay
      while (load_acquire(counters + index - 1) < target) __nanosleep(20);
    }
    __syncthreads();
  }
  const int per_block = (kValues + gridDim.x - 1) / gridDim.x;
  const int begin = blockIdx.x * per_block;
  const int end = begin + per_block < kValues ? begin + per_block : kValues;
  for (int j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const float a = __ldcg(in + j), b = __ldcg(in + (j * 7 + 1) % kValues);
    out[j] = a * 0.5f + b * 0.25f + 1.0f;
  }
  if (M == Mode::flag) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(counters + index, 1u);
    }
    grid_wait();
  }
}

// A GEMM's stand-in: streams `bytes` of weights (XOR of what it loads).
__global__ void stream_kernel(const uint4* __restrict__ w, int64_t units, uint32_t* sink) {
  launch_next();
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < units; i += stride) {
    const uint4 v = __ldcs(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  grid_wait();
  if (acc == 0x12345678u) sink[0] = acc;
}

template <typename... Params, typename... Args>
void launch(bool programmatic, void (*kernel)(Params...), int blocks, int threads, cudaStream_t s,
            Args... args) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(blocks);
  c.blockDim = dim3(threads);
  c.stream = s;
  cudaLaunchAttribute a[1] = {};
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = a;
  c.numAttrs = programmatic ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&c, kernel, args...));
}

struct Buffers {
  float* values = nullptr;  // (L + 1) × kValues
  uint32_t* counters = nullptr;
  uint32_t* epoch = nullptr;
  uint4* weights = nullptr;
  int64_t weight_units = 0;
  uint32_t* sink = nullptr;
};

// µs per chain kernel, the median of `replays` graph launches.
double time_chain(Mode mode, int kernels, int blocks, int threads, int replays, const Buffers& b,
                  int64_t stream_units, cudaStream_t s) {
  CHECK(cudaMemset(b.counters, 0, sizeof(uint32_t) * kernels));
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kernels; ++i) {
    const float* in = b.values + static_cast<int64_t>(i) * kValues;
    float* out = b.values + static_cast<int64_t>(i + 1) * kValues;
    const bool programmatic = mode != Mode::plain;
    if (mode == Mode::plain)
      launch(false, step_kernel<Mode::plain>, blocks, threads, s, in, out, b.counters, i,
             static_cast<const uint32_t*>(b.epoch), static_cast<uint32_t>(blocks));
    else if (mode == Mode::pdl)
      launch(true, step_kernel<Mode::pdl>, blocks, threads, s, in, out, b.counters, i,
             static_cast<const uint32_t*>(b.epoch), static_cast<uint32_t>(blocks));
    else
      launch(true, step_kernel<Mode::flag>, blocks, threads, s, in, out, b.counters, i,
             static_cast<const uint32_t*>(b.epoch), static_cast<uint32_t>(blocks));
    if (stream_units > 0 && i % 2 == 1)
      launch(programmatic, stream_kernel, 264, 512, s, static_cast<const uint4*>(b.weights), stream_units,
             b.sink);
  }
  CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < replays + 2; ++r) {
    const uint32_t epoch = static_cast<uint32_t>(r + 1);
    CHECK(cudaMemcpyAsync(b.epoch, &epoch, sizeof(epoch), cudaMemcpyHostToDevice, s));
    CHECK(cudaEventRecord(e0, s));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return 1000.0 * ms[ms.size() / 2] / kernels;
}

}  // namespace

int main(int argc, char** argv) {
  int kernels = 256, replays = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--kernels") == 0) kernels = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--replays") == 0) replays = std::atoi(argv[i + 1]);
  }
  if (kernels < 2 || replays < 1) {
    std::fprintf(stderr, "usage: bench_handoff_latency [--kernels L >= 2] [--replays R >= 1]\n");
    return 2;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  Buffers b;
  CHECK(cudaMalloc(&b.values, sizeof(float) * static_cast<size_t>(kernels + 1) * kValues));
  CHECK(cudaMemset(b.values, 0, sizeof(float) * static_cast<size_t>(kernels + 1) * kValues));
  CHECK(cudaMalloc(&b.counters, sizeof(uint32_t) * kernels));
  CHECK(cudaMalloc(&b.epoch, sizeof(uint32_t)));
  const int64_t weight_bytes = int64_t{64} << 20;  // 32 MiB per stream kernel below, 2 halves
  CHECK(cudaMalloc(&b.weights, weight_bytes));
  CHECK(cudaMemset(b.weights, 1, weight_bytes));
  CHECK(cudaMalloc(&b.sink, sizeof(uint32_t)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("%-6s %7s %7s %10s %10s %10s\n", "blocks", "threads", "stream", "plain_us", "pdl_us",
              "flag_us");
  const int shapes[][2] = {{1, 1024}, {1, 256}, {32, 256}, {132, 256}, {264, 256}};
  for (int64_t stream_mib : {int64_t{0}, int64_t{32}}) {
    const int64_t units = (stream_mib << 20) / 16;
    for (const auto& sh : shapes) {
      const double p = time_chain(Mode::plain, kernels, sh[0], sh[1], replays, b, units, s);
      const double d = time_chain(Mode::pdl, kernels, sh[0], sh[1], replays, b, units, s);
      const double f = time_chain(Mode::flag, kernels, sh[0], sh[1], replays, b, units, s);
      std::printf("%-6d %7d %5lldMi %10.3f %10.3f %10.3f\n", sh[0], sh[1], static_cast<long long>(stream_mib),
                  p, d, f);
    }
  }
  std::printf(
      "(with a stream: one 32 MiB streaming kernel after every second chain kernel; µs per chain kernel)\n");
  return 0;
}
