// device.cpp — parsing and checking device placements (model/device.h).
#include "model/device.h"

#include <cstdlib>

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
  if (c.moe.num_experts > 0) return "sparse MoE layers";
  if (c.gemma_norms || c.scale_embeddings || c.local_rope)
    return "Gemma's norms, embedding scale and local RoPE";
  if (c.attn_softcap != 0.0f || c.final_softcap != 0.0f) return "soft-capping";
  if (c.attn_scale != 0.0f) return "a query scale other than 1/sqrt(head_dim)";
  if (c.mlp_activation != Activation::silu) return "MLP activations other than SiLU";
  return "";
}

}  // namespace tandem::model
