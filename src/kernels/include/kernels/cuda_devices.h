// What the CUDA runtime reports about this machine: whether CUDA was compiled
// in (cmake -DTANDEM_CUDA=AUTO|ON|OFF), the runtime and driver versions, and
// every visible device. Thread-safe; each call asks the runtime afresh. Never
// fails: a missing driver or device is described in `status`, not raised.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tandem::kernels {

struct CudaDevice {
  int index = 0;
  std::string name;
  int sm_major = 0;
  int sm_minor = 0;
  std::size_t total_memory_bytes = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;  // e.g. "0000:19:00.0"
};

struct CudaReport {
  bool compiled_in = false;
  int runtime_version = 0;  // CUDART_VERSION style: 13000 = 13.0
  int driver_version = 0;   // 0 when no driver is installed
  std::string status;       // "ok", "no CUDA device", "no CUDA driver", "not compiled in", ...
  std::vector<CudaDevice> devices;
};

CudaReport query_cuda_devices();

// "13.0" from 13000.
std::string cuda_version_string(int version);

}  // namespace tandem::kernels
