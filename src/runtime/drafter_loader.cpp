#include "runtime/drafter_loader.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "model/config.h"
#include "model/gguf_model.h"
#include "model/mtp_layout.h"
#include "runtime/gguf_text_side.h"
#include "scheduler/metrics.h"
#include "speculative/draft_model.h"
#include "speculative/mtp.h"

namespace tandem::runtime {

namespace {

// K: the flag (or env), else what the drafter's config declares (0: nothing), else the default.
Status resolve_block_size(const DrafterOptions& options, int declared, LoadedDrafter& out) {
  if (options.block_size > 0) {
    out.block_size = options.block_size;
    out.block_size_rule = options.block_size_rule;
  } else if (declared > 0) {
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
  return Status::Ok();
}

// A GGUF drafter is a draft model (an MTP head has no GGUF form); its
// vocabulary is compared with the target's through both tokenizers. K has no
// config to come from: the flag, else the default. (DraftModelDrafter::load
// maps the file a second time; the metadata parse is cheap next to the weights.)
Expected<LoadedDrafter> load_gguf_draft_model(const DrafterOptions& options, const model::Model& target,
                                              const std::optional<tok::Tokenizer>& target_tokenizer,
                                              ThreadPool* pool) {
  LoadedDrafter out;
  if (!options.kind.empty() && options.kind != "draft")
    return invalid_argument("drafter " + options.dir +
                            " is a GGUF file, which can only be a draft model, not " + options.kind);
  TANDEM_RETURN_IF_ERROR(resolve_block_size(options, 0, out));
  TANDEM_ASSIGN_OR_RETURN(model::GgufFile file, model::GgufFile::open(options.dir));
  TANDEM_ASSIGN_OR_RETURN(model::ModelConfig draft_config, model::gguf_config(file));
  TANDEM_ASSIGN_OR_RETURN(TextSide draft_text, load_gguf_text_side(file, draft_config));
  TANDEM_RETURN_IF_ERROR(speculative::DraftModelDrafter::check_compatible(
      target.dir(), target.config(), target_tokenizer ? &*target_tokenizer : nullptr, options.dir,
      draft_config, draft_text.tokenizer ? &*draft_text.tokenizer : nullptr));
  TANDEM_ASSIGN_OR_RETURN(auto d, speculative::DraftModelDrafter::load(options.dir, std::move(draft_config),
                                                                       pool, options.max_tokens));
  out.drafter = std::move(d);
  spdlog::info("drafter {} (kind draft, a GGUF file); block size {} from {}", options.dir, out.block_size,
               out.block_size_rule);
  return out;
}

}  // namespace

int declared_block_size(const nlohmann::json& j) {
  if (!j.is_object()) return 0;
  if (j.contains("draft_block_size") && j["draft_block_size"].is_number_integer())
    return j["draft_block_size"].get<int>();
  if (j.contains("num_speculative_tokens") && j["num_speculative_tokens"].is_number_integer())
    return j["num_speculative_tokens"].get<int>() + 1;
  return 0;
}

namespace {

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

// The target's own MTP layers (ADR 0027): -md naming the target itself, or --draft-kind mtp alone.
Expected<LoadedDrafter> load_target_mtp_layers(const DrafterOptions& options, const model::Model& target,
                                               ThreadPool* pool) {
  LoadedDrafter out;
  auto drafter = speculative::MtpDrafter::load_embedded(target, pool, options.max_tokens);
  if (!drafter.ok()) {
    if (drafter.status().code() != StatusCode::kNotFound) return drafter.status();
    const std::string asked =
        options.dir.empty() ? options.kind_rule + " mtp without -md" : "-md " + options.dir;
    return invalid_argument(
        asked + " drafts with the MTP layers of the target's own checkpoint, but " +
        drafter.status().message() +
        "; give -md/--model-draft DIR for a separate drafter (an MTP head or a draft model)");
  }
  TANDEM_RETURN_IF_ERROR(resolve_block_size(options, 0, out));
  if (target.checkpoint().find("model.mtp_layers.1.input_proj.weight"))
    spdlog::info("{} holds more than one MTP module; module 0 drafts at every depth, the others are not used",
                 target.dir());
  spdlog::info("drafter: the MTP layers of the target {} ({}; kind mtp, {}); block size {} from {}",
               target.dir(), (*drafter)->layout().description,
               options.kind.empty() ? "detected from its tensors" : "from " + options.kind_rule,
               out.block_size, out.block_size_rule);
  out.drafter = std::move(*drafter);
  return out;
}

}  // namespace

Expected<LoadedDrafter> load_drafter(const DrafterOptions& options, const model::Model& target,
                                     const std::optional<tok::Tokenizer>& target_tokenizer,
                                     ThreadPool* pool) {
  LoadedDrafter out;
  if (!options.has_drafter()) return out;
  std::optional<speculative::DraftKind> forced;
  if (!options.kind.empty()) {
    TANDEM_ASSIGN_OR_RETURN(forced, speculative::parse_draft_kind(options.kind));
  }
  // No directory (a kind alone) or the target's own: its MTP layers when asked for or present;
  // -md naming a target without them stays what it was, a copy of the target as draft model.
  const bool at_target = options.dir.empty() || same_directory(options.dir, target.dir());
  if (at_target && forced != speculative::DraftKind::draft) {
    const auto layout = model::find_embedded_mtp_layout(target.checkpoint(), target.config());
    if (options.dir.empty() || forced == speculative::DraftKind::mtp ||
        layout.status().code() != StatusCode::kNotFound)
      return load_target_mtp_layers(options, target, pool);
  }
  if (!options.dir.empty() && model::is_gguf_path(options.dir))
    return load_gguf_draft_model(options, target, target_tokenizer, pool);
  if (options.dir.empty())
    return invalid_argument(options.kind_rule + " " + options.kind +
                            " needs a drafter directory: give -md/--model-draft DIR");
  // The drafter's config.json, read once: kind detection, K and the loaders use this value.
  const std::string config_path = options.dir + "/config.json";
  TANDEM_ASSIGN_OR_RETURN(nlohmann::json config, model::read_json_file(config_path));
  speculative::DraftKind kind;
  if (forced) {
    kind = *forced;
  } else {
    TANDEM_ASSIGN_OR_RETURN(kind, speculative::detect_draft_kind(config, config_path));
  }
  // A full checkpoint with MTP layers inside: they were trained on its own trunk's hidden states.
  if (kind == speculative::DraftKind::mtp && config.is_object() &&
      config.value("model_type", std::string()) != "tandem_mtp") {
    const std::string type = config.value("model_type", std::string());
    return invalid_argument(config_path + ": a full checkpoint (model_type '" + type +
                            "') with MTP layers inside; those draft only for the checkpoint they belong to. "
                            "Serve it as the target (-m " +
                            options.dir +
                            ") with -md naming it too or --draft-kind mtp alone, or pass --draft-kind draft "
                            "to use it as a draft model");
  }
  TANDEM_RETURN_IF_ERROR(resolve_block_size(options, declared_block_size(config), out));
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
    TANDEM_ASSIGN_OR_RETURN(auto d,
                            speculative::DraftModelDrafter::load(options.dir, std::move(draft_config), pool,
                                                                 options.max_tokens, target.placement()));
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
