#include <string>

#include "kernels/cuda_devices.h"

namespace tandem::kernels {

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace tandem::kernels
