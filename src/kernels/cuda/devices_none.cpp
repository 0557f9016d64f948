// query_cuda_devices() in a build without CUDA (TANDEM_CUDA=OFF, or AUTO without nvcc).
#include "kernels/cuda_devices.h"

namespace tandem::kernels {

CudaReport query_cuda_devices() {
  CudaReport report;
  report.status = "not compiled in";
  return report;
}

}  // namespace tandem::kernels
