// device.cpp — parsing and checking device placements (model/device.h).
#include "model/device.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kernels/cuda_devices.h"
#include "kernels/ops.h"
#include "model/config.h"

#ifdef TANDEM_HAVE_CUDA
#include "kernels/cuda_ops.h"
#endif

namespace tandem::model {

Expected<Placement> parse_device(const std::string& text, bool* is_auto) {
  if (is_auto) *is_auto = false;
  if (text == "cpu") return Placement{DeviceKind::cpu, 0};
  if (text == "auto") {
    if (is_auto) *is_auto = true;
    return Placement{DeviceKind::cpu, 0};
  }
  if (text == "cuda") return Placement{DeviceKind::cuda, 0};
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 8) {
    int index = 0;
    for (size_t i = 5; i < text.size(); ++i) {
      if (text[i] < '0' || text[i] > '9') {
        index = -1;
        break;
      }
      index = index * 10 + (text[i] - '0');
    }
    if (index >= 0) return Placement{DeviceKind::cuda, index};
  }
  return invalid_argument("device \"" + text + "\": expected cpu, cuda, cuda:N or auto");
}

std::string device_name(const Placement& placement) {
  return placement.kind == DeviceKind::cpu ? "cpu" : "cuda:" + std::to_string(placement.index);
}

std::string DeviceInfo::description() const {
  if (model.empty() && sm.empty()) return device;
  std::string out = device + " (" + model;
  if (!sm.empty()) out += ", " + sm;
  if (multiprocessors > 0) out += ", " + std::to_string(multiprocessors) + " SMs";
  if (!driver.empty()) out += ", driver " + driver;
  if (!numerics.empty()) out += ", " + numerics + " x";
  return out + ")";
}

std::string nvidia_module_version(const std::string& proc_text) {
  const std::string marker = "Kernel Module";
  const size_t at = proc_text.find(marker);
  if (at == std::string::npos) return "";
  // "Kernel Module  580.159.04" or "Open Kernel Module for x86_64  580.159.04": the version is
  // the first word of digits and dots on that line.
  const size_t end = proc_text.find('\n', at);
  std::istringstream line(proc_text.substr(at + marker.size(), end == std::string::npos ? end : end - at));
  for (std::string word; line >> word;)
    if (word.find('.') != std::string::npos && word.find_first_not_of("0123456789.") == std::string::npos)
      return word;
  return "";
}

DeviceInfo describe_device(const Placement& placement) {
  DeviceInfo info;
  info.device = device_name(placement);
  if (placement.kind == DeviceKind::cpu) {
    info.numerics = kernels::activations_name(kernels::active_activations());  // bf16 weights' (ADR 0082)
    return info;
  }
  const kernels::CudaReport report = kernels::query_cuda_devices();
  for (const auto& d : report.devices) {
    if (d.index != placement.index) continue;
    info.model = d.name;
    info.sm = "sm_" + std::to_string(d.sm_major) + std::to_string(d.sm_minor);
    info.multiprocessors = d.multiprocessors;
  }
  std::ifstream proc("/proc/driver/nvidia/version");
  std::stringstream text;
  text << proc.rdbuf();
  info.driver = nvidia_module_version(text.str());
  if (info.driver.empty() && report.driver_version > 0)
    info.driver = "cuda " + kernels::cuda_version_string(report.driver_version);
  auto numerics = cuda_activations();
  info.numerics = numerics.ok() ? *numerics : "?";  // the forward refuses an unknown value
  return info;
}

Expected<std::string> cuda_activations() {
  const char* act = std::getenv("TANDEM_CUDA_ACTIVATIONS");
  const std::string activations = act != nullptr && *act != '\0' ? act : "bf16";
  if (activations != "bf16" && activations != "f32")
    return invalid_argument("TANDEM_CUDA_ACTIVATIONS='" + activations + "' is not one of: bf16, f32");
  return activations;
}

int cuda_device_count() {
#ifdef TANDEM_HAVE_CUDA
  return kernels::gpu::device_count();
#else
  return 0;
#endif
}

bool cuda_available() { return cuda_device_count() > 0; }

Status check_placement(const Placement& placement) {
  if (placement.kind == DeviceKind::cpu) return Status::Ok();
#ifndef TANDEM_HAVE_CUDA
  return failed_precondition("device " + device_name(placement) +
                             ": this build has no CUDA (configure with TANDEM_CUDA=ON)");
#else
  const int count = cuda_device_count();
  if (placement.index < 0 || placement.index >= count)
    return failed_precondition("device " + device_name(placement) + ": " + std::to_string(count) +
                               " CUDA device(s) visible");
  return Status::Ok();
#endif
}

Expected<double> device_read_bandwidth(const Placement& placement, size_t bytes, int passes) {
  TANDEM_RETURN_IF_ERROR(check_placement(placement));
  if (placement.kind == DeviceKind::cpu)
    return failed_precondition("device_read_bandwidth: not a CUDA device");
#ifdef TANDEM_HAVE_CUDA
  TANDEM_RETURN_IF_ERROR(kernels::gpu::set_device(placement.index));
  auto stream = kernels::gpu::Stream::create();
  if (!stream.ok()) return stream.status();
  return kernels::gpu::measure_read_bandwidth(*stream, bytes, passes);
#else
  return failed_precondition("this build has no CUDA");
#endif
}

std::string cuda_unsupported_feature(const ModelConfig& c) {
  // Every family the CPU forward runs also runs on the device (ADR 0045); the
  // router kernel keeps a row's probabilities in registers and local memory.
  if (c.moe.num_experts > 512) return "more than 512 experts";
  return "";
}

}  // namespace tandem::model
