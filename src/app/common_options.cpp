#include "common_options.h"

#include "core/env.h"
#include "model/device.h"

namespace tandem::app {
namespace {

std::string env_list(const std::vector<const char*>& names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace

CLI::Option* add_model_option(CLI::App* sub, std::string& dir, bool from_env) {
  const std::string help =
      "Model directory (Hugging Face layout: config.json, *.safetensors, tokenizer files) or a GGUF file";
  if (from_env) return sub->add_option("-m,--model", dir, help + " (env " + env_list(kModelVariables) + ")");
  return sub->add_option("-m,--model", dir, help)->required();
}

CLI::Option* add_threads_option(CLI::App* sub, int& threads, int min, bool from_env) {
  std::string help = "Kernel threads (default: " +
                     (threads == 0 ? std::string("all hardware threads") : std::to_string(threads));
  if (from_env) help += "; env " + env_list(kThreadsVariables);
  return sub->add_option("-t,--threads", threads, help + ")")->check(CLI::Range(min, 1024));
}

CLI::Option* add_device_option(CLI::App* sub, std::string& device) {
  return sub
      ->add_option("--device", device,
                   "Where the forward runs: auto|cpu|cuda|cuda:N (default auto: cuda when a device is "
                   "present and the weights are bf16 or GPU-quantized (q8_0, q4_0, q5_0, q4_k, q5_k, q6_k); "
                   "env TANDEM_DEVICE)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            auto parsed = model::parse_device(value);
            return parsed.ok() ? std::string() : parsed.status().message();
          },
          "DEVICE"));
}

std::string resolve_device_option(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (auto v = env_string("TANDEM_DEVICE"); v && !is_blank(*v)) return to_lower(trim(*v));
  return "auto";
}

CLI::Option* add_gemm_option(CLI::App* sub, std::string& gemm) {
  return sub->add_option("--gemm", gemm, "Matmul kernel request: invariant|splitk|auto (TANDEM_GEMM pins)");
}

CLI::Option* add_weights_option(CLI::App* sub, std::string& weights) {
  return sub->add_option(
      "--weights", weights,
      "Quantize the weights at load: stored|q8_0|q4_0|q4_k (default stored; env TANDEM_WEIGHTS; "
      "docs/quantized.md)");
}

}  // namespace tandem::app
