// cuda_check.h — CUDA runtime errors as tandem Status values (internal to
// tandem_kernels_cuda). A failed call becomes a Status naming the call and the
// runtime's error, e.g. "cudaMalloc(1024 bytes): cudaErrorMemoryAllocation
// (out of memory)"; out-of-memory maps to ResourceExhausted, everything else
// to Internal. Never aborts.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace tandem::kernels::gpu {

inline Status cuda_status(cudaError_t err, const std::string& call) {
  if (err == cudaSuccess) return Status::Ok();
  // Reported here, so clear it: a later launch_status must not pick up this
  // (non-sticky) error again. Sticky errors (a kernel fault) stay regardless.
  cudaGetLastError();
  std::string message = call + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorMemoryAllocation) return resource_exhausted(std::move(message));
  return internal_error(std::move(message));
}

// The launch error of the kernel just queued (configuration errors show here;
// faults inside the kernel show at the next synchronising call).
inline Status launch_status(const char* kernel) {
  return cuda_status(cudaGetLastError(), std::string("launch ") + kernel);
}

}  // namespace tandem::kernels::gpu
