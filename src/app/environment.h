// Start-up validation of the environment (docs/environment.md). Every
// TANDEM_* variable a subcommand reads is checked before anything loads, so
// a malformed or out-of-range value is an error (exit 2) naming the variable
// and the value — never ignored, taken as a default, or failing later. The
// layers below read no environment for these (TANDEM_KERNELS aside, which
// the kernels still read themselves): the app reads them here and passes the
// values in — TANDEM_GEMM pins the kernels' matmul mode, TANDEM_MTP_ALLOW_INEXACT
// goes to each ExactnessGate, TANDEM_MTP_ADAPTIVE / TANDEM_ENABLE_MTP_B1 /
// TANDEM_CACHE_DIR / HOME to the engine as a scheduler::PolicyEnv. The GPU
// knobs (TANDEM_CUDA_*, TANDEM_STEP_TIMING) are still read below, where they
// are used: gpu_knobs.h checks them and rewrites them to the spelling those
// readers agree on. A blank value counts as unset everywhere:
// validate_environment removes blank ones from the environment so that every
// reader agrees.
//
// Serve's flags that variables mirror (--port / TANDEM_PORT / LLAMA_ARG_PORT,
// ...) go through apply_env_mirrors: the flag wins; otherwise the variable's
// value is checked by the flag's own validators, and an error names the
// variable, its value and the flag.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/weights_quant.h"
#include "scheduler/policy.h"

namespace tandem::app {

// TANDEM_LOG_LEVEL, read by every subcommand: checks it and applies it.
Status apply_log_level();

// The variables serve, generate, probe and bench pass to the layers below:
// TANDEM_KERNELS, TANDEM_GEMM, TANDEM_MTP_ALLOW_INEXACT, TANDEM_MTP_ADAPTIVE,
// TANDEM_ENABLE_MTP_B1, and the GPU knobs (TANDEM_CUDA_*, TANDEM_STEP_TIMING:
// validate_gpu_knobs, which also rewrites them to their canonical spelling).
// (The drafter's are resolve_drafter_options'.) Also applies TANDEM_KERNELS:
// kernels::select_isa() with its limit (start-up, before any kernel thread runs),
// and TANDEM_CPU_ACTIVATIONS (ADR 0082): kernels::select_activations().
Status validate_environment();

// TANDEM_GEMM (after validate_environment): the mode it pins (--gemm is then
// only a request that the pin overrides), nullopt when unset.
std::optional<kernels::GemmMode> gemm_pin_from_env();

// --weights' value when given, else TANDEM_WEIGHTS (validated by
// validate_environment), else stored.
Expected<model::WeightsQuant> resolve_weights_option(const std::string& flag);

// TANDEM_MTP_ALLOW_INEXACT (after validate_environment): the ExactnessGate's
// allow_inexact.
bool allow_inexact_from_env();

// The speculation policy's variables (TANDEM_MTP_ADAPTIVE, TANDEM_ENABLE_MTP_B1,
// TANDEM_CACHE_DIR, HOME) as an EngineConfig::policy_env. Errors as
// scheduler::PolicyEnv::parse (validate_environment reports them first).
Expected<scheduler::PolicyEnv> policy_env_from_env();

// Serve's own: TANDEM_SHUTDOWN_DRAIN_MS, TANDEM_LOAD_DELAY_MS.
Status validate_serve_environment();

// An integer variable already validated: its value, or `fallback` when unset or blank.
int64_t env_int_or(const char* name, int64_t fallback);

struct EnvMirror {
  CLI::Option* option;
  std::vector<const char*> names;  // in precedence order: TANDEM_* first, then LLAMA_ARG_*
  bool boolean = false;            // a flag: the value must be a boolean (parse_bool)
  bool inverted = false;           // a boolean variable that turns the flag off (TANDEM_NO_WEBUI for --webui)
};

// For each mirror whose option was not given on the command line, the first
// of its variables that is set and not blank becomes the option's value.
Status apply_env_mirrors(const std::vector<EnvMirror>& mirrors);

// Prints "tandem <command>: <message>" to stderr and returns 2, the exit
// status of a start-up (usage) error.
int usage_error(const char* command, const Status& status);

}  // namespace tandem::app
