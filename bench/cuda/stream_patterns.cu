// stream_patterns.cu — how fast the H200 streams a weight matrix under the
// access patterns a batch-invariant M <= 8 GEMM can use (issue 15: "M = 1..16
// within 10% of the bandwidth ceiling"). No GEMM arithmetic: each warp XORs
// what it loads, so the figure is the memory system's alone.
//
//   contiguous  every warp reads 512 contiguous bytes per instruction,
//               grid-stride over the whole matrix (the ceiling);
//   rows        the register-direct small tile's pattern (gemm_direct.cuh): a
//               warp owns 16 weight rows of one K slice, lane (g, c) reads 16
//               bytes of rows g and g + 8 per 32-wide k chunk, U chunks per
//               batch (row pitch K: each row is read in 64·U-byte pieces);
//   fragments   the same warp/unit split over a fragment-major layout: one
//               unit's 16 rows × slice stored contiguously, chunk after chunk
//               (1 KB per chunk), so each warp streams one contiguous run.
//
// No tandem library (only gemm_kernel.cuh's inline mma wrapper): the target
// bench_stream_patterns (bench/cuda.cmake); run on the GPU machine; prints one line per
// (shape, pattern, U, warps per block) with GB/s, best of 20 launches.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "check_or_exit.cuh"
#include "cuda/gemm_kernel.cuh"  // mma_bf16: the small tile's instruction

using tandem::kernels::gpu::mma_bf16;

__device__ __forceinline__ uint4 ld_nc(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__global__ void contiguous_kernel(const uint4* __restrict__ w, int64_t units, uint32_t* out) {
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 7 * stride < units; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = ld_nc(w + i + u * stride);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < units; i += stride) {
    const uint4 v = ld_nc(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// One unit = (16-row group, K slice); units ordered group-fastest (as the
// small tile's grid: x = groups, z = slices). FRAG: fragment-major layout.

// MMA: the small tile's chain instead of the XOR (one accumulator, 2 mma per chunk; x = 1.0s).
template <int U, bool PIPE, bool FRAG, bool MMA = false>
__global__ void unit_kernel(const uint16_t* __restrict__ w, int64_t n, int64_t k, int64_t slice, int slices,
                            int warps_per_block, uint32_t* out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int64_t groups = n / 16;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * warps_per_block + warp;
  if (id >= groups * slices) return;
  const int64_t group = id % groups, z = id / groups;
  const int64_t k0 = z * slice, k1 = k0 + slice < k ? k0 + slice : k;
  const int chunks = static_cast<int>((k1 - k0) / 32);
  const uint16_t *p0, *p1;
  int64_t step;  // elements per chunk along one lane's stream
  if (FRAG) {    // [slice z][group][chunk][16 rows][32]: unit base = (z * groups + group) * 16 * slice
    const uint16_t* base = w + (z * groups + group) * 16 * slice;
    p0 = base + lane * 8;
    p1 = base + 256 + lane * 8;
    step = 512;
  } else {
    p0 = w + (group * 16 + g) * k + k0 + 8 * c;
    p1 = p0 + 8 * k;
    step = 32;
  }
  uint32_t acc = 0;
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  const uint32_t one = 0x3f803f80u;
  uint4 cur[U][2], nxt[U][2];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (u < chunks) cur[u][0] = ld_nc(p0 + u * step), cur[u][1] = ld_nc(p1 + u * step);
  for (int q0 = 0; q0 < chunks; q0 += U) {
    if (PIPE) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (q0 + U + u < chunks)
          nxt[u][0] = ld_nc(p0 + (q0 + U + u) * step), nxt[u][1] = ld_nc(p1 + (q0 + U + u) * step);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (q0 + u < chunks) {
        if (MMA) {
          mma_bf16(d, cur[u][0].x, cur[u][1].x, cur[u][0].y, cur[u][1].y, one, one);
          mma_bf16(d, cur[u][0].z, cur[u][1].z, cur[u][0].w, cur[u][1].w, one, one);
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h) acc ^= cur[u][h].x ^ cur[u][h].y ^ cur[u][h].z ^ cur[u][h].w;
        }
      }
    if (PIPE) {
#pragma unroll
      for (int u = 0; u < U; ++u) cur[u][0] = nxt[u][0], cur[u][1] = nxt[u][1];
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (q0 + U + u < chunks)
          cur[u][0] = ld_nc(p0 + (q0 + U + u) * step), cur[u][1] = ld_nc(p1 + (q0 + U + u) * step);
    }
  }
  if (acc == 0x12345678u || d[0] + d[1] + d[2] + d[3] == 1.2345f) out[0] = acc;
}

struct Shape {
  const char* name;
  int64_t n, k, slice;
};

template <class F>
float best_ms(F launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();
  float best = 1e9f;
  for (int r = 0; r < 20; ++r) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (ms < best) best = ms;
  }
  CHECK(cudaGetLastError());
  return best;
}

template <int U, bool PIPE, bool FRAG, bool MMA = false>
void run_units(const Shape& s, const uint16_t* w, uint32_t* out, int wpb) {
  const int slices = static_cast<int>((s.k + s.slice - 1) / s.slice);
  const int64_t units = s.n / 16 * slices;
  const int blocks = static_cast<int>((units + wpb - 1) / wpb);
  const float ms = best_ms(
      [&] { unit_kernel<U, PIPE, FRAG, MMA><<<blocks, wpb * 32>>>(w, s.n, s.k, s.slice, slices, wpb, out); });
  const double bytes = 2.0 * s.n * s.k;
  std::printf("%-10s %-10s%s U=%-2d pipe=%d warps/block=%d units=%-5lld  %8.2f us  %7.1f GB/s\n", s.name,
              FRAG ? "fragments" : "rows", MMA ? "+mma" : "    ", U, PIPE ? 1 : 0, wpb,
              static_cast<long long>(units), ms * 1e3, bytes / (ms * 1e-3) / 1e9);
}

int main() {
  // Llama-3.1-8B / Qwen2.5-0.5B decode matrices and their gemm_slicing(n, k) slices.
  const Shape shapes[] = {{"8B.qkv", 6144, 4096, 1536},       {"8B.o", 4096, 4096, 1024},
                          {"8B.gate_up", 28672, 4096, 4096},  {"8B.down", 4096, 14336, 3584},
                          {"8B.lm_head", 128256, 4096, 4096}, {"0.5B.gate_up", 9728, 896, 896}};
  int64_t max_bytes = 0;
  for (const Shape& s : shapes) max_bytes = s.n * s.k * 2 > max_bytes ? s.n * s.k * 2 : max_bytes;
  uint16_t* w = nullptr;
  uint32_t* out = nullptr;
  CHECK(cudaMalloc(&w, max_bytes));
  CHECK(cudaMalloc(&out, 64));
  CHECK(cudaMemset(w, 1, max_bytes));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (const Shape& s : shapes) {
    const int64_t units16 = s.n * s.k * 2 / 16;
    for (int per_sm : {4, 8}) {
      const float ms = best_ms(
          [&] { contiguous_kernel<<<sms * per_sm, 256>>>(reinterpret_cast<const uint4*>(w), units16, out); });
      std::printf("%-10s contiguous blocks=%d x 256           %8.2f us  %7.1f GB/s\n", s.name, sms * per_sm,
                  ms * 1e3, 2.0 * s.n * s.k / (ms * 1e-3) / 1e9);
    }
    for (int wpb : {2, 4}) {
      run_units<4, true, false>(s, w, out, wpb);
      run_units<4, true, true>(s, w, out, wpb);
      run_units<8, true, false>(s, w, out, wpb);
      run_units<8, true, true>(s, w, out, wpb);
      run_units<8, false, true>(s, w, out, wpb);
      run_units<16, false, false>(s, w, out, wpb);
      run_units<16, false, true>(s, w, out, wpb);
      run_units<4, true, false, true>(s, w, out, wpb);
      run_units<4, true, true, true>(s, w, out, wpb);
      run_units<8, true, true, true>(s, w, out, wpb);
    }
  }
  // The 2 GB read ceiling (as tandem bench's --bw-mib working sets are far larger than L2).
  CHECK(cudaFree(w));
  const int64_t big = int64_t{4} << 30;
  CHECK(cudaMalloc(&w, big));
  CHECK(cudaMemset(w, 1, big));
  const float ms =
      best_ms([&] { contiguous_kernel<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(w), big / 16, out); });
  std::printf("ceiling    contiguous 4 GiB                      %8.2f us  %7.1f GB/s\n", ms * 1e3,
              big / (ms * 1e-3) / 1e9);
  return 0;
}
