// Where `tandem serve` runs the model (ADR 0030): tandem's --device
// (auto|cpu|cuda|cuda:N, env TANDEM_DEVICE, then llama-server's
// LLAMA_ARG_DEVICE) and llama-server's -ngl/--n-gpu-layers (env
// LLAMA_ARG_N_GPU_LAYERS), resolved into one device spelling for
// runtime::OpenOptions::device before the port is bound.
//
// -ngl: 0 → cpu; auto → as --device says; -1, all, or a count ≥ the model's
// layers (999 included) → every layer on the GPU; 1 .. layers-1 → partial
// offload, an InvalidArgument naming the count and the model's layers.
// -ngl ≥ layers without a CUDA device is what llama-server does with it: a
// warning and the CPU (unless --device asks for cuda: then the load fails
// saying why). Contradictions (-ngl 0 with --device cuda, -ngl all with
// --device cpu) are InvalidArgument. Start-up only.
#pragma once

#include <string>

#include "core/status.h"

namespace tandem::app {

// A --device value in tandem's spelling: auto, cpu, cuda, cuda:N, or
// llama-server's (none → cpu, CUDA0 → cuda:0; one device only). `from`
// names where the value came from (the flag or the variable), for the error.
Expected<std::string> normalize_serve_device(const std::string& value, const std::string& from);

struct ServeDeviceRequest {
  std::string device;                    // normalized --device (or its variables); "" when not given
  std::string gpu_layers;                // -ngl as given (or LLAMA_ARG_N_GPU_LAYERS); "" when not given
  std::string gpu_layers_from = "-ngl";  // names the flag or variable in errors
  std::string model;                     // -m: its config gives the layer count
};

// The device to open the model on ("auto", "cpu", "cuda", "cuda:N").
// `cuda_present`: a CUDA device is visible to this build (model::cuda_available()).
Expected<std::string> resolve_serve_device(const ServeDeviceRequest& request, bool cuda_present);

// A cuda device that this build or machine does not have is an
// InvalidArgument before anything loads (model::check_placement's reason).
Status check_serve_device(const std::string& device);

}  // namespace tandem::app
