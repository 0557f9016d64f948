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

// What a placement's device is, for logs, /health, /metrics and the
// speculation policy's hardware label (ADR 0030). For cpu only `device` is
// set ("cpu"); for cuda the runtime's answer: the product name ("NVIDIA
// H200"), the SM version ("sm_90"), the multiprocessor count and the driver
// (the kernel module's version from /proc/driver/nvidia/version, e.g.
// "580.159.04"; else "cuda 13.0", the CUDA version the driver supports).
// Fields the runtime cannot tell stay empty; never fails.
struct DeviceInfo {
  std::string device;  // device_name(): "cpu" or "cuda:N"
  std::string model, sm, driver;
  int multiprocessors = 0;
  // cuda: the forward's GEMM-input numerics ("bf16" or "f32", cuda_activations()),
  // so that verdicts measured under one never apply to the other; cpu: what bf16
  // weights multiply ("bf16" or "f32", kernels::active_activations(), ADR 0082).
  std::string numerics;
  // "cpu", or "cuda:0 (NVIDIA H200, sm_90, 132 SMs, driver 580.159.04, bf16 x)".
  std::string description() const;
};
DeviceInfo describe_device(const Placement& placement);
// The CUDA forward's GEMM inputs from TANDEM_CUDA_ACTIVATIONS: "bf16" (unset or empty: the
// default, ADR 0054) or "f32" (the hi + lo split, ADR 0006); any other value is InvalidArgument.
Expected<std::string> cuda_activations();
// The kernel module's version in the text of /proc/driver/nvidia/version
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ..."), or "".
std::string nvidia_module_version(const std::string& proc_text);
// True when this build has CUDA and at least one device is visible.
bool cuda_available();

struct ModelConfig;
// What of `config` the CUDA forward does not run (ADR 0009 / 0045: every family
// runs; only limits such as the router's expert count remain), as a phrase for an
// error message; "" when it runs all of it. Model::place_on refuses such a model (FailedPrecondition).
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
