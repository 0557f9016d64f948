#include "runtime/drafter_loader.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "model/config.h"
#include "scheduler/metrics.h"
#include "speculative/draft_model.h"
#include "speculative/mtp.h"

namespace tandem::runtime {

int declared_block_size(const nlohmann::json& j) {
  if (!j.is_object()) return 0;
  if (j.contains("draft_block_size") && j["draft_block_size"].is_number_integer())
    return j["draft_block_size"].get<int>();
  if (j.contains("num_speculative_tokens") && j["num_speculative_tokens"].is_number_integer())
    return j["num_speculative_tokens"].get<int>() + 1;
  return 0;
}

Expected<LoadedDrafter> load_drafter(const DrafterOptions& options, const model::Model& target,
                                     const std::optional<tok::Tokenizer>& target_tokenizer,
                                     ThreadPool* pool) {
  LoadedDrafter out;
  if (options.dir.empty()) return out;
  // The drafter's config.json, read once: kind detection, K and the loaders use this value.
  const std::string config_path = options.dir + "/config.json";
  TANDEM_ASSIGN_OR_RETURN(nlohmann::json config, model::read_json_file(config_path));
  speculative::DraftKind kind;
  if (!options.kind.empty()) {
    TANDEM_ASSIGN_OR_RETURN(kind, speculative::parse_draft_kind(options.kind));
  } else {
    TANDEM_ASSIGN_OR_RETURN(kind, speculative::detect_draft_kind(config, config_path));
  }
  // Block size: flag > env (both in options, resolve_drafter_options) > drafter config > default.
  if (options.block_size > 0) {
    out.block_size = options.block_size;
    out.block_size_rule = options.block_size_rule;
  } else if (int declared = declared_block_size(config); declared > 0) {
    out.block_size = declared;
    out.block_size_rule = "drafter config";
  } else {
    out.block_size = kDefaultDraftBlockSize;
    out.block_size_rule = "default";
  }
  if (out.block_size < scheduler::kMinDraftBlockSize || out.block_size > scheduler::kMaxDraftBlockSize)
    return invalid_argument("draft block size must be between " +
                            std::to_string(scheduler::kMinDraftBlockSize) + " and " +
                            std::to_string(scheduler::kMaxDraftBlockSize) + ", got " +
                            std::to_string(out.block_size) + " (from " + out.block_size_rule + ")");
  if (kind == speculative::DraftKind::draft) {
    TANDEM_ASSIGN_OR_RETURN(model::ModelConfig draft_config, model::parse_config(config.dump(), config_path));
    draft_config.weights = options.weights;
    std::optional<tok::Tokenizer> draft_tokenizer;
    if (const std::string path = options.dir + "/tokenizer.json"; std::ifstream(path).good()) {
      TANDEM_ASSIGN_OR_RETURN(tok::Tokenizer t, tok::Tokenizer::from_file(path));
      draft_tokenizer = std::move(t);
    }
    TANDEM_RETURN_IF_ERROR(speculative::DraftModelDrafter::check_compatible(
        target.dir(), target.config(), target_tokenizer ? &*target_tokenizer : nullptr, options.dir,
        draft_config, draft_tokenizer ? &*draft_tokenizer : nullptr));
    // check_compatible compares the tokenizers only when both directories ship one.
    for (const std::string& dir : {target.dir(), options.dir}) {
      if (dir == target.dir() ? target_tokenizer.has_value() : draft_tokenizer.has_value()) continue;
      spdlog::warn(
          "{}/tokenizer.json not found: the vocabularies of the drafter {} and the target {} could not be "
          "compared, only their vocab_size ({}); a drafter with another vocabulary still gives exact "
          "output, but its drafts would be rejected",
          dir, options.dir, target.dir(), target.config().vocab_size);
      break;
    }
    TANDEM_ASSIGN_OR_RETURN(auto d, speculative::DraftModelDrafter::load(options.dir, std::move(draft_config),
                                                                         pool, options.max_tokens));
    out.drafter = std::move(d);
  } else {
    TANDEM_ASSIGN_OR_RETURN(auto d, speculative::MtpDrafter::load(options.dir, std::move(config), target,
                                                                  pool, options.max_tokens));
    out.drafter = std::move(d);
  }
  spdlog::info("drafter {} (kind {}, {}); block size {} from {}", options.dir,
               speculative::draft_kind_name(kind),
               options.kind.empty() ? "detected from config.json" : "from " + options.kind_rule,
               out.block_size, out.block_size_rule);
  return out;
}

}  // namespace tandem::runtime
