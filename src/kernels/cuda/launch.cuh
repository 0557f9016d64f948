// launch.cuh — kernel launches with programmatic dependent launch (PDL,
// ADR 0041; internal to tandem_kernels_cuda).
//
// launch_kernel() queues a kernel like <<<grid, block, smem, stream>>>, but
// through cudaLaunchKernelEx with the attribute
// cudaLaunchAttributeProgrammaticStreamSerialization when
// programmatic_launch_enabled() (sm_90+, TANDEM_CUDA_PDL not 0): the kernel's
// blocks may then start while the previous kernel on the stream is still
// running (captured into a graph as a programmatic edge).
//
// The contract every kernel launched this way keeps (the bits cannot change:
// only when a block starts moves, never what it computes):
//   - pdl_wait() before its first read of anything a previous kernel wrote and
//     before its first global write (a still-running predecessor may read the
//     buffer). pdl_wait() returns once every prerequisite grid has completed
//     and its writes are visible; without the attribute it returns at once.
//   - every block calls pdl_wait() before it exits, even when it has nothing
//     to do: the wait is what makes "kernel n done" imply "kernel n-1 done".
//   - pdl_launch_dependents() (any time; here: first thing) lets the next
//     kernel be scheduled once every block of this one has called it or
//     exited. It never releases the next kernel's pdl_wait().
//   - a pointer to what an earlier kernel wrote is a plain pointer, not
//     `const __restrict__`, and is not read through __ldg: nvcc may treat
//     such loads as invariant (ld.global.nc) and hoist them above pdl_wait()
//     (it did, ADR 0077). Every kernel here follows this. Weights and
//     host-copied step inputs may keep `__restrict__`, and __ldg.
// Only reads of data no kernel writes may come before pdl_wait(): the weights,
// and the step's row inputs (positions, rope positions, block tables), which
// only a host-to-device copy writes. That copy is stream-ordered before the
// step's first kernel, and a kernel starts no earlier than its predecessor
// started, so every kernel of the step starts after the copy completed; the
// next step's copy waits for this step's last kernel (ADR 0061). A graphed step
// may instead copy them in its first kernel (stage_inputs, ADR 0090), which
// never calls pdl_launch_dependents: its successors start after it completed,
// so the same holds. For the
// same reason a row that is its sequence's only new key may read the KV
// pool's rows of its earlier positions before pdl_wait() (attention_from_qkv,
// ADR 0075): only earlier calls wrote them.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.h"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Both, in the order every kernel here starts with.
__device__ __forceinline__ void pdl_enter() {
  pdl_launch_dependents();
  pdl_wait();
}

// A thread block cluster's width (blocks along x), for launch_kernel's second form.
struct LaunchCluster {
  unsigned x;
};

// Queues kernel<<<grid, block, smem, stream>>>(args...), programmatic when
// enabled, in clusters of `cluster.x` blocks along x when given (grid.x a
// multiple of it; sm_90+); the launch error (if any) as a Status naming `what`.
template <typename... Params, typename... Args>
Status launch_kernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                     cudaStream_t stream, LaunchCluster cluster, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[2] = {};
  unsigned count = 0;
  if (programmatic_launch_enabled()) {
    attribute[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x > 1) {
    attribute[count].id = cudaLaunchAttributeClusterDimension;
    attribute[count].val.clusterDim.x = cluster.x;
    attribute[count].val.clusterDim.y = 1;
    attribute[count++].val.clusterDim.z = 1;
  }
  config.attrs = attribute;
  config.numAttrs = count;
  return cuda_status(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...),
                     std::string("launch ") + what);
}

template <typename... Params, typename... Args>
Status launch_kernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                     cudaStream_t stream, Args&&... args) {
  return launch_kernel(what, kernel, grid, block, smem, stream, LaunchCluster{1},
                       std::forward<Args>(args)...);
}

}  // namespace tandem::kernels::gpu
