// Loading a drafter (docs/spec-speculative.md §1 steps 2-4) once its options
// are resolved (app/drafter_setup resolves flags and variables): which kind,
// whether it is compatible with the target, and the block size K — logging
// which rule decided each. The drafter's config.json is read once and the
// parsed value is what the kind detection, K and the loader see.
//
// The one rule for K: the flag, else TANDEM_DRAFT_BLOCK_SIZE (both already
// in DrafterOptions), else the drafter's config.json (draft_block_size, or
// num_speculative_tokens + 1), else 4; a K outside
// scheduler::kMinDraftBlockSize..kMaxDraftBlockSize is InvalidArgument.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "speculative/drafter.h"
#include "tokenizer/tokenizer.h"

namespace tandem::runtime {

inline constexpr int kDefaultDraftBlockSize = 4;

struct DrafterOptions {
  std::string dir;              // -md / --model-draft / --draft-model (env LLAMA_ARG_MODEL_DRAFT)
  std::string kind;             // --draft-kind (env TANDEM_DRAFT_KIND); empty: detect
  std::string kind_rule;        // "--draft-kind" or "TANDEM_DRAFT_KIND" when kind is set
  int block_size = 0;           // --draft-block-size (env TANDEM_DRAFT_BLOCK_SIZE); 0: unset
  std::string block_size_rule;  // "--draft-block-size" or "TANDEM_DRAFT_BLOCK_SIZE" when block_size is set
  // Draft KV capacity in positions. The context suffices: the engine's rounds stay below
  // prompt + max_tokens - 1 (a smaller cache only shrinks rounds, never fails them).
  int64_t max_tokens = 4096;

  // A directory, or a kind alone (--draft-kind mtp: the target's own MTP layers).
  bool has_drafter() const { return !dir.empty() || !kind.empty(); }
  // A draft model's matrices quantized at load (open_drafter copies the
  // target's --weights here; an MTP head keeps its stored precision).
  model::WeightsQuant weights = model::WeightsQuant::stored;
};

struct LoadedDrafter {
  std::unique_ptr<speculative::Drafter> drafter;  // null when no drafter is configured
  int block_size = kDefaultDraftBlockSize;
  // "--draft-block-size", "TANDEM_DRAFT_BLOCK_SIZE", "drafter config", "default"
  std::string block_size_rule;
};

// A width a drafter's parsed config.json declares (draft_block_size, or
// num_speculative_tokens + 1), or 0.
int declared_block_size(const nlohmann::json& config);

// Loads the drafter of `options` for `target` (nothing without
// has_drafter(); a path ending in .gguf is a GGUF draft model, model/gguf_model.h). `target_tokenizer`: the
// target's, as the opener loaded it (absent: the target ships none); a draft model's vocabulary is compared
// with it. The target's own MTP layers (MiMo's model.mtp_layers.*, ADR 0027)
// draft when options.dir is the target's directory and they are present or
// the kind is mtp, or when the kind is mtp and there is no directory; asked
// for and absent, that is InvalidArgument naming the directory. A separate
// full checkpoint with MTP layers inside is refused as an MTP drafter (its
// layers belong to its own trunk).
Expected<LoadedDrafter> load_drafter(const DrafterOptions& options, const model::Model& target,
                                     const std::optional<tok::Tokenizer>& target_tokenizer, ThreadPool* pool);

}  // namespace tandem::runtime
