// Drafter options shared by serve, generate, probe and bench
// (docs/spec-speculative.md §1 step 1): the flags, declared once, and their
// variables. Flags beat their variables; a kind or K without a drafter, or a
// K outside kMinDraftBlockSize..kMaxDraftBlockSize, is a start-up error
// (resolve_drafter_options). Loading the drafter (kind, compatibility, the
// rule for K) is runtime::load_drafter, called by runtime::open_model.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "runtime/drafter_loader.h"
#include "speculative/exactness.h"

namespace tandem::app {

// The options (runtime/drafter_loader.h) this file fills from flags and variables.
using runtime::DrafterOptions;

// Adds --model-draft (-md), --draft-kind and, when `block_size`, --draft-block-size
// (range-checked by CLI11, so a bad K exits 2 naming the flag) to a subcommand.
void add_drafter_options(CLI::App* sub, DrafterOptions& options, bool block_size);

// Fills unset options from the environment and checks them: a malformed or
// out-of-range TANDEM_DRAFT_KIND / TANDEM_DRAFT_BLOCK_SIZE, or a kind or block
// size without a drafter directory, is InvalidArgument (a start-up error) —
// except kind mtp, which alone means the target's own MTP layers.
Status resolve_drafter_options(DrafterOptions& options);

// The matmul mode to run with: --gemm (`gemm`, empty: not given) is a
// request; TANDEM_GEMM (after validate_environment) pins and wins. Passed
// down to the exactness gate and the forwards; nothing process-wide is set.
// Errors list the accepted values.
Expected<speculative::GemmRequest> resolve_gemm_option(const std::string& gemm);

// The start-up checks generate and probe share, in order (nothing reads a
// variable before it is validated): the environment, the drafter options,
// then --gemm. Any failure is a usage error (exit 2).
Expected<speculative::GemmRequest> check_startup(DrafterOptions& drafter, const std::string& gemm);

}  // namespace tandem::app
