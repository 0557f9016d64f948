// Drafter resolution shared by serve, generate, probe and bench
// (docs/spec-speculative.md §1 steps 1-4): which directory, which kind, whether
// it is compatible with the target, and the block size K — logging which
// rule decided each. Flags beat their variables; a kind or K without a
// drafter, or a K outside kMinDraftBlockSize..kMaxDraftBlockSize, is a
// start-up error (resolve_drafter_options).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "speculative/drafter.h"

namespace tandem::app {

struct DrafterOptions {
  std::string dir;              // -md / --model-draft / --draft-model (env LLAMA_ARG_MODEL_DRAFT)
  std::string kind;             // --draft-kind (env TANDEM_DRAFT_KIND); empty: detect
  std::string kind_rule;        // "--draft-kind" or "TANDEM_DRAFT_KIND" when kind is set
  int block_size = 0;           // --draft-block-size (env TANDEM_DRAFT_BLOCK_SIZE); 0: unset
  std::string block_size_rule;  // "--draft-block-size" or "TANDEM_DRAFT_BLOCK_SIZE" when block_size is set
  // Draft KV capacity in positions. The context suffices: the engine's rounds stay below
  // prompt + max_tokens - 1 (a smaller cache only shrinks rounds, never fails them).
  int64_t max_tokens = 4096;
};

struct LoadedDrafter {
  std::unique_ptr<speculative::Drafter> drafter;  // null when no drafter is configured
  int block_size = 4;
  // "--draft-block-size", "TANDEM_DRAFT_BLOCK_SIZE", "drafter config", "default"
  std::string block_size_rule;
};

// Adds --model-draft (-md), --draft-kind and, when `block_size`, --draft-block-size
// (range-checked by CLI11, so a bad K exits 2 naming the flag) to a subcommand.
void add_drafter_options(CLI::App* sub, DrafterOptions& options, bool block_size);

// Fills unset options from the environment and checks them: a malformed or
// out-of-range TANDEM_DRAFT_KIND / TANDEM_DRAFT_BLOCK_SIZE, or a kind or block
// size without a drafter directory, is InvalidArgument (a start-up error).
Status resolve_drafter_options(DrafterOptions& options);

Expected<LoadedDrafter> load_drafter(const DrafterOptions& options, const model::Model& target,
                                     ThreadPool* pool);

// Applies --gemm (a request; TANDEM_GEMM pins and wins). Errors list the accepted values.
Status apply_gemm_option(const std::string& gemm);

}  // namespace tandem::app
