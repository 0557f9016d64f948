// query_cuda_devices() through the CUDA runtime (compiled when TANDEM_CUDA is on).
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda_devices.h"

namespace tandem::kernels {

CudaReport query_cuda_devices() {
  CudaReport report;
  report.compiled_in = true;
  cudaRuntimeGetVersion(&report.runtime_version);
  if (cudaDriverGetVersion(&report.driver_version) != cudaSuccess) report.driver_version = 0;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    report.status = "no CUDA device";
    return report;
  }
  if (err == cudaErrorInsufficientDriver && report.driver_version == 0) {
    report.status = "no CUDA driver";
    return report;
  }
  if (err != cudaSuccess) {
    report.status =
        std::string("CUDA error: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    return report;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    CudaDevice d;
    d.index = i;
    d.name = prop.name;
    d.sm_major = prop.major;
    d.sm_minor = prop.minor;
    d.total_memory_bytes = prop.totalGlobalMem;
    d.multiprocessors = prop.multiProcessorCount;
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) d.pci_bus_id = bus;
    report.devices.push_back(std::move(d));
  }
  report.status = "ok";
  return report;
}

}  // namespace tandem::kernels
