#include "serve_device.h"

#include <cstdlib>

#include "core/env.h"
#include "core/log.h"
#include "model/config.h"
#include "model/device.h"
#include "model/gguf_model.h"

namespace tandem::app {
namespace {

bool is_cuda(const std::string& device) { return device.rfind("cuda", 0) == 0; }

// The model's decoder layers, or 0 when its config cannot be read here (the
// load then reports the file at fault).
int layer_count(const std::string& model_path) {
  if (model::is_gguf_path(model_path)) {
    auto file = model::GgufFile::open(model_path);
    if (!file.ok()) return 0;
    auto config = model::gguf_config(*file);
    return config.ok() ? config->num_layers : 0;
  }
  auto config = model::load_config(model_path);
  return config.ok() ? config->num_layers : 0;
}

enum class Layers { none, all, device_choice };

// -ngl's value: 0, auto, -1, all, or a count (compared with the model's layers).
Expected<Layers> parse_gpu_layers(const ServeDeviceRequest& r) {
  const std::string v = to_lower(trim(r.gpu_layers));
  const std::string what = r.gpu_layers_from + " " + trim(r.gpu_layers);
  if (v.empty() || v == "auto") return Layers::device_choice;
  if (v == "all" || v == "-1") return Layers::all;
  auto n = parse_int(v);
  if (!n || *n < -1)
    return invalid_argument(what + ": not a layer count; accepted: 0 (CPU), auto, all, -1, or a number");
  if (*n == 0) return Layers::none;
  const int layers = layer_count(r.model);
  if (layers > 0 && *n < layers)
    return invalid_argument(what + ": partial offload (" + std::to_string(*n) + " of the model's " +
                            std::to_string(layers) +
                            " layers on the GPU) is not supported: the whole model runs on one device. "
                            "Use -ngl 0 (CPU) or -ngl all / -1 / " +
                            std::to_string(layers) + " or more (every layer on the GPU)");
  return Layers::all;
}

}  // namespace

Expected<std::string> normalize_serve_device(const std::string& value, const std::string& from) {
  const std::string v = to_lower(trim(value));
  const std::string what = from.rfind("-", 0) == 0 ? from + " " + value : from + "='" + value + "'";
  if (v == "none") return std::string("cpu");  // llama-server: no device, the CPU
  if (v.find(',') != std::string::npos)
    return invalid_argument(what + ": one device only (the whole model runs on it)");
  // llama-server names CUDA devices CUDA0, CUDA1, ...
  if (v.rfind("cuda", 0) == 0 && v.size() > 4 && v[4] != ':' &&
      v.find_first_not_of("0123456789", 4) == v.npos)
    return "cuda:" + v.substr(4);
  if (auto p = model::parse_device(v); !p.ok())
    return invalid_argument(what +
                            ": expected auto, cpu, cuda or cuda:N (or llama-server's none, CUDA0, ...)");
  return v;
}

Status check_serve_device(const std::string& device) {
  if (!is_cuda(device)) return Status::Ok();
  TANDEM_ASSIGN_OR_RETURN(model::Placement placement, model::parse_device(device));
  if (Status s = model::check_placement(placement); !s.ok())
    return invalid_argument(s.message() +
                            " (asked for by --device / -ngl; --device auto serves on the CPU "
                            "when there is none)");
  return Status::Ok();
}

Expected<std::string> resolve_serve_device(const ServeDeviceRequest& r, bool cuda_present) {
  TANDEM_ASSIGN_OR_RETURN(Layers layers, parse_gpu_layers(r));
  const std::string ngl = r.gpu_layers_from + " " + trim(r.gpu_layers);
  switch (layers) {
    case Layers::device_choice:
      return r.device.empty() ? std::string("auto") : r.device;
    case Layers::none:
      if (is_cuda(r.device))
        return invalid_argument(ngl + " (every layer on the CPU) and --device " + r.device + " disagree");
      return std::string("cpu");
    case Layers::all:
      if (r.device == "cpu")
        return invalid_argument(ngl + " (every layer on the GPU) and --device cpu disagree");
      if (is_cuda(r.device)) return r.device;
      if (!cuda_present) {
        spdlog::warn("{}: no CUDA device is visible to this build; serving on the CPU (as llama-server does)",
                     ngl);
        return std::string("cpu");
      }
      return std::string("cuda");
  }
  return std::string("auto");
}

}  // namespace tandem::app
