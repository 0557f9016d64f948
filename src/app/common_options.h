// The options several subcommands take, declared once (gemma.cpp's
// gemma_args.h, llama.cpp's common/arg.cpp): the model directory, the kernel
// threads and the matmul kernel request; the drafter's are in
// drafter_setup.h. Each helper adds the option with the one help text and,
// where a variable mirrors it, the one spelling of that variable.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>
#include <vector>

namespace tandem::app {

// The variables `serve` reads for -m and -t, in precedence order.
inline const std::vector<const char*> kModelVariables = {"TANDEM_MODEL", "LLAMA_ARG_MODEL"};
inline const std::vector<const char*> kThreadsVariables = {"TANDEM_THREADS", "LLAMA_ARG_THREADS"};

// -m/--model DIR. `from_env`: the help names kModelVariables (the caller
// reads them); otherwise the option is required.
CLI::Option* add_model_option(CLI::App* sub, std::string& dir, bool from_env = false);

// -t/--threads N, N in min..1024; the help states the default `threads`
// holds (0: all hardware threads). `from_env`: the help names
// kThreadsVariables (the caller mirrors them, e.g. with apply_env_mirrors).
CLI::Option* add_threads_option(CLI::App* sub, int& threads, int min = 0, bool from_env = false);

// --device auto|cpu|cuda|cuda:N (default auto: cuda when a device is present
// and the weights are bf16 or quantized in a type the GPU runs, ADR 0077); env TANDEM_DEVICE when the flag is
// absent (resolve_device_option).
CLI::Option* add_device_option(CLI::App* sub, std::string& device);
// The device to open with: the flag when given, else TANDEM_DEVICE, else "auto".
std::string resolve_device_option(const std::string& flag);

// --gemm invariant|splitk|auto: a request; TANDEM_GEMM pins (resolve_gemm_option).
CLI::Option* add_gemm_option(CLI::App* sub, std::string& gemm);

// --weights stored|q8_0|q4_0|q4_k: quantize the model's matrices at load
// (model/weights_quant.h); TANDEM_WEIGHTS when the flag is absent
// (resolve_weights_option).
CLI::Option* add_weights_option(CLI::App* sub, std::string& weights);

// Rows per Forward chunk for `generate` and `bench`: the Forward's default 128
// on the CPU; 1024 for a model on a GPU, whose GEMMs reach their large tile
// only at M in the hundreds (ADR 0044), or TANDEM_CUDA_CHUNK_ROWS there (for
// measurements). Chunking never changes a bit.
inline long forward_chunk_rows(bool on_gpu) {
  if (!on_gpu) return 128;
  const char* e = std::getenv("TANDEM_CUDA_CHUNK_ROWS");
  const long rows = e != nullptr ? std::atol(e) : 0;
  return rows > 0 ? rows : 1024;
}

}  // namespace tandem::app
