// `tandem info`: what this machine offers and what tandem will use.
#include <cstdio>
#include <thread>

#include "commands.h"
#include "core/cpu_features.h"
#include "environment.h"
#include "kernels/cuda_devices.h"

namespace tandem::app {

namespace {

void print_cuda() {
  const kernels::CudaReport cuda = kernels::query_cuda_devices();
  if (!cuda.compiled_in) {
    std::printf("cuda: not compiled in (build with -DTANDEM_CUDA=ON)\n");
    return;
  }
  std::printf("cuda: compiled in (runtime %s, driver %s)\n",
              kernels::cuda_version_string(cuda.runtime_version).c_str(),
              kernels::cuda_version_string(cuda.driver_version).c_str());
  if (cuda.devices.empty()) {
    std::printf("cuda devices: none (%s)\n", cuda.status.c_str());
    return;
  }
  for (const auto& d : cuda.devices) {
    std::printf("cuda device %d: %s, sm_%d%d, %d SMs, %.1f GiB, pci %s\n", d.index, d.name.c_str(),
                d.sm_major, d.sm_minor, d.multiprocessors,
                static_cast<double>(d.total_memory_bytes) / (1024.0 * 1024 * 1024), d.pci_bus_id.c_str());
  }
}

}  // namespace

Command add_info_command(CLI::App& app) {
  CLI::App* sub =
      app.add_subcommand("info", "Show CPU features, the kernel variant tandem selects and the CUDA devices");
  return {sub, [] {
            // The same start-up check as every other subcommand: info reports what tandem would
            // use, and a typo in a TANDEM_* variable would otherwise go unnoticed here.
            if (Status s = validate_environment(); !s.ok()) return usage_error("info", s);
            const auto& f = cpu_features();
            std::printf("cpu: %s\n", f.model_name.c_str());
            std::printf("hardware threads: %u\n", std::thread::hardware_concurrency());
            std::printf("features: %s\n", f.describe().c_str());
            print_cuda();
            return 0;
          }};
}

}  // namespace tandem::app
