#include "environment.h"

#include <cstdio>
#include <cstdlib>

#include "core/env.h"
#include "core/log.h"
#include "gpu_knobs.h"
#include "kernels/ops.h"
#include "kernels/prefetch.h"
#include "model/device.h"

namespace tandem::app {
namespace {

// The variable's value when it is set and not blank. A blank one is removed
// from the environment: some readers below (the scheduler policy) would
// otherwise take a set-but-empty TANDEM_ENABLE_MTP_B1 as "on". Start-up is
// single-threaded here, so unsetenv is safe.
std::optional<std::string> non_blank(const char* name) {
  auto v = env_string(name);
  if (v && is_blank(*v)) {
    ::unsetenv(name);
    return std::nullopt;
  }
  return v;
}

Status check_bool(const char* name) {
  if (auto v = non_blank(name)) return check_bool_value(name, *v);
  return Status::Ok();
}

Status check_int(const char* name, int64_t lo, int64_t hi) {
  if (auto v = non_blank(name)) return check_int_value(name, *v, lo, hi);
  return Status::Ok();
}

Status check_choice(const char* name, const std::vector<std::string>& accepted) {
  if (auto v = non_blank(name)) return check_choice_value(name, *v, accepted);
  return Status::Ok();
}

// TANDEM_CPU_ACTIVATIONS (checked by the caller; ADR 0082): f32 or bf16 as
// named; auto and unset: bf16 where it runs natively (AVX-512 kernels on a CPU
// with AVX512_BF16), else f32.
kernels::Activations cpu_activations_from_env() {
  kernels::Activations a;
  if (auto v = non_blank("TANDEM_CPU_ACTIVATIONS"); v && kernels::parse_activations(v->c_str(), &a)) return a;
  return kernels::bf16_activations_native() ? kernels::Activations::bf16 : kernels::Activations::f32;
}

}  // namespace

Status apply_log_level() {
  auto v = non_blank("TANDEM_LOG_LEVEL");
  if (!v) {
    spdlog::set_level(spdlog::level::info);  // blank: the default (init_logging read "" as "off")
    return Status::Ok();
  }
  TANDEM_RETURN_IF_ERROR(check_choice_value(
      "TANDEM_LOG_LEVEL", *v, {"trace", "debug", "info", "warn", "warning", "error", "critical", "off"}));
  spdlog::set_level(spdlog::level::from_str(to_lower(trim(*v))));
  return Status::Ok();
}

Status validate_environment() {
  TANDEM_RETURN_IF_ERROR(check_choice("TANDEM_KERNELS", {"scalar", "reference", "avx2", "avx512"}));
  // The ISA limit goes to the kernels once, here, before any kernel thread runs.
  if (auto v = non_blank("TANDEM_KERNELS"))
    kernels::select_isa(kernels::isa_limit_from_env(v->c_str(), kernels::best_supported_isa()));
  TANDEM_RETURN_IF_ERROR(check_choice("TANDEM_CPU_ACTIVATIONS", {"f32", "bf16", "auto"}));
  kernels::select_activations(cpu_activations_from_env());  // after the ISA: auto asks what is native
  if (auto v = non_blank("TANDEM_CPU_PREFETCH")) {          // on top of the vendor's tuned policy
    const auto p = kernels::parse_prefetch_policy(*v, kernels::prefetch_policy());
    if (!p)
      return invalid_argument(
          "TANDEM_CPU_PREFETCH='" + *v +
          "' is not a list of key=value with keys near, far, stream_far, quant, share (bytes >= "
          "0), next (0 or 1), streams (1.." +
          std::to_string(kernels::kMaxRowStreams) + "), kstreams (0..16)");
    kernels::set_prefetch_policy(*p);
  }
  if (auto v = non_blank("TANDEM_GEMM")) {
    kernels::GemmMode mode;
    if (!kernels::parse_gemm_mode(v->c_str(), &mode))
      return invalid_argument("TANDEM_GEMM='" + *v + "' is not one of: invariant, splitk");
  }
  if (auto v = non_blank("TANDEM_DEVICE")) {
    if (!model::parse_device(to_lower(trim(*v))).ok())
      return invalid_argument("TANDEM_DEVICE='" + *v + "' is not one of: auto, cpu, cuda, cuda:N");
  }
  TANDEM_RETURN_IF_ERROR(check_choice("TANDEM_WEIGHTS", {"stored", "q8_0", "q4_0", "q4_k"}));
  for (const char* name : {"TANDEM_MTP_ALLOW_INEXACT", "TANDEM_MTP_ADAPTIVE", "TANDEM_ENABLE_MTP_B1"})
    TANDEM_RETURN_IF_ERROR(check_bool(name));
  // Checked in every build, so a CPU-only binary refuses the same typos a CUDA one does.
  return validate_gpu_knobs();
}

std::optional<kernels::GemmMode> gemm_pin_from_env() {
  auto v = non_blank("TANDEM_GEMM");
  kernels::GemmMode mode;
  if (!v || !kernels::parse_gemm_mode(v->c_str(), &mode)) return std::nullopt;
  return mode;
}

Expected<model::WeightsQuant> resolve_weights_option(const std::string& flag) {
  if (!is_blank(flag)) {
    auto w = model::parse_weights_quant(flag);
    if (!w.ok()) return invalid_argument("--weights: " + w.status().message());
    return w;
  }
  if (auto v = non_blank("TANDEM_WEIGHTS")) {
    auto w = model::parse_weights_quant(*v);
    if (!w.ok()) return invalid_argument("TANDEM_WEIGHTS: " + w.status().message());
    return w;
  }
  return model::WeightsQuant::stored;
}

bool allow_inexact_from_env() { return env_bool("TANDEM_MTP_ALLOW_INEXACT").value_or(false); }

Expected<scheduler::PolicyEnv> policy_env_from_env() {
  return scheduler::PolicyEnv::parse([](const char* name) { return env_string(name); });
}

Status validate_serve_environment() {
  constexpr int64_t kHourMs = 3'600'000;
  TANDEM_RETURN_IF_ERROR(check_int("TANDEM_SHUTDOWN_DRAIN_MS", 0, kHourMs));
  TANDEM_RETURN_IF_ERROR(check_int("TANDEM_LOAD_DELAY_MS", 0, kHourMs));
  return Status::Ok();
}

int64_t env_int_or(const char* name, int64_t fallback) {
  auto v = env_string(name);
  if (!v) return fallback;
  return parse_int(*v).value_or(fallback);
}

Status apply_env_mirrors(const std::vector<EnvMirror>& mirrors) {
  for (const EnvMirror& m : mirrors) {
    if (m.option->count() > 0) continue;  // the flag wins
    for (const char* name : m.names) {
      auto v = env_string(name);
      if (!v || is_blank(*v)) continue;
      std::string value = trim(*v);
      if (m.boolean) {
        TANDEM_RETURN_IF_ERROR(check_bool_value(name, *v));
        value = (*parse_bool(value) != m.inverted) ? "true" : "false";
      }
      try {
        m.option->add_result(value);
        m.option->run_callback();  // the option's own checks (ranges) and conversion
      } catch (const CLI::Error& e) {
        return invalid_argument(std::string(name) + "='" + *v + "' is not valid for " + m.option->get_name() +
                                ": " + e.what());
      }
      break;
    }
  }
  return Status::Ok();
}

int usage_error(const char* command, const Status& status) {
  std::fprintf(stderr, "tandem %s: %s\n", command, status.message().c_str());
  return 2;
}

}  // namespace tandem::app
