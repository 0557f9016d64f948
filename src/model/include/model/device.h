// model/device.h — where a model's forward runs: the CPU or one CUDA device.
//
// A Placement names the backend and, for CUDA, the device index (nothing
// assumes device 0 is the only one). parse_device() reads the user-facing
// spelling ("cpu", "cuda", "cuda:N"); resolve_device() turns "auto" into cuda
// when a device is present and the build has CUDA, else cpu. Errors are
// InvalidArgument / FailedPrecondition Status values naming the spelling; never an
// abort. Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tandem::model {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Placement {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // CUDA device ordinal (ignored for cpu)
  bool operator==(const Placement&) const = default;
};

// "cpu" | "cuda" | "cuda:N" | "auto" (auto: set `is_auto`, placement cpu).
Expected<Placement> parse_device(const std::string& text, bool* is_auto = nullptr);
// "cpu" or "cuda:N".
std::string device_name(const Placement& placement);
// True when this build has CUDA and at least one device is visible.
bool cuda_available();

struct ModelConfig;
// What of `config` the CUDA forward does not run (ADR 0009: the dense
// Llama-style block only), as a phrase for an error message; "" when it runs
// all of it. Model::place_on refuses such a model (FailedPrecondition).
std::string cuda_unsupported_feature(const ModelConfig& config);
// Number of visible CUDA devices (0 without CUDA in the build).
int cuda_device_count();
// Checks that `placement` can be used here: cuda needs the build's CUDA and
// index < device count (FailedPrecondition otherwise).
Status check_placement(const Placement& placement);
// The read bandwidth (bytes/s) of `placement`'s device memory: one pass over
// `bytes` of device memory, best of `passes` (cuda only; FailedPrecondition
// for cpu, which the caller measures itself).
Expected<double> device_read_bandwidth(const Placement& placement, size_t bytes, int passes);

}  // namespace tandem::model
