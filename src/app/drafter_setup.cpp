#include "drafter_setup.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "kernels/ops.h"
#include "scheduler/metrics.h"
#include "speculative/draft_model.h"
#include "speculative/mtp.h"

namespace tandem::app {

void add_drafter_options(CLI::App* sub, DrafterOptions& o, bool block_size) {
  sub->add_option("--model-draft,--draft-model", o.dir,
                  "Drafter directory (-md): a small model or an MTP head (env LLAMA_ARG_MODEL_DRAFT)");
  sub->add_option_function<std::string>(
         "--draft-kind",
         [&o](const std::string& kind) {
           o.kind = kind;
           o.kind_rule = "--draft-kind";
         },
         "draft|mtp (default: detected from the drafter's config.json; env TANDEM_DRAFT_KIND)")
      ->check(CLI::IsMember({"draft", "mtp"}, CLI::ignore_case));
  if (!block_size) return;
  const std::string range =
      std::to_string(scheduler::kMinDraftBlockSize) + ".." + std::to_string(scheduler::kMaxDraftBlockSize);
  sub->add_option_function<int>(
         "--draft-block-size",
         [&o](int k) {
           o.block_size = k;
           o.block_size_rule = "--draft-block-size";
         },
         "Tokens per verify forward, " + range +
             " (env TANDEM_DRAFT_BLOCK_SIZE; default: the drafter's config.json, else 4; needs -md)")
      ->check(CLI::Range(scheduler::kMinDraftBlockSize, scheduler::kMaxDraftBlockSize));
}

Status resolve_drafter_options(DrafterOptions& o) {
  auto variable = [](const char* name) -> std::optional<std::string> {
    auto v = env_string(name);
    if (!v || is_blank(*v)) return std::nullopt;
    return v;
  };
  if (o.dir.empty()) o.dir = variable("LLAMA_ARG_MODEL_DRAFT").value_or("");
  if (o.kind.empty()) {
    if (auto v = variable("TANDEM_DRAFT_KIND")) {
      TANDEM_RETURN_IF_ERROR(check_choice_value("TANDEM_DRAFT_KIND", *v, {"draft", "mtp"}));
      o.kind = *v;
      o.kind_rule = "TANDEM_DRAFT_KIND";
    }
  }
  if (o.block_size == 0) {
    if (auto v = variable("TANDEM_DRAFT_BLOCK_SIZE")) {
      TANDEM_RETURN_IF_ERROR(check_int_value("TANDEM_DRAFT_BLOCK_SIZE", *v, scheduler::kMinDraftBlockSize,
                                             scheduler::kMaxDraftBlockSize));
      o.block_size = static_cast<int>(*parse_int(*v));
      o.block_size_rule = "TANDEM_DRAFT_BLOCK_SIZE";
    }
  }
  if (o.dir.empty()) {
    auto needs_drafter = [](const std::string& rule, const std::string& value) {
      const bool flag = rule.rfind("--", 0) == 0;
      return invalid_argument((flag ? rule + " " + value : rule + "='" + value + "'") +
                              " needs a drafter: give -md/--model-draft DIR (or LLAMA_ARG_MODEL_DRAFT)");
    };
    if (o.block_size > 0) return needs_drafter(o.block_size_rule, std::to_string(o.block_size));
    if (!o.kind.empty()) return needs_drafter(o.kind_rule, o.kind);
  }
  return Status::Ok();
}

namespace {

// A width the drafter's config.json declares (draft_block_size, or
// num_speculative_tokens + 1), or 0.
int declared_block_size(const std::string& dir) {
  auto text = read_text_file(dir + "/config.json");
  if (!text.ok()) return 0;
  try {
    auto j = nlohmann::json::parse(*text);
    if (j.contains("draft_block_size") && j["draft_block_size"].is_number_integer())
      return j["draft_block_size"].get<int>();
    if (j.contains("num_speculative_tokens") && j["num_speculative_tokens"].is_number_integer())
      return j["num_speculative_tokens"].get<int>() + 1;
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}

}  // namespace

Expected<LoadedDrafter> load_drafter(const DrafterOptions& options, const model::Model& target,
                                     ThreadPool* pool) {
  LoadedDrafter out;
  if (options.dir.empty()) return out;
  speculative::DraftKind kind;
  if (!options.kind.empty()) {
    TANDEM_ASSIGN_OR_RETURN(kind, speculative::parse_draft_kind(options.kind));
  } else {
    TANDEM_ASSIGN_OR_RETURN(kind, speculative::detect_draft_kind(options.dir));
  }
  // Block size: flag > env (both in options, resolve_drafter_options) > drafter config > default 4.
  if (options.block_size > 0) {
    out.block_size = options.block_size;
    out.block_size_rule = options.block_size_rule;
  } else if (int declared = declared_block_size(options.dir); declared > 0) {
    out.block_size = declared;
    out.block_size_rule = "drafter config";
  } else {
    out.block_size = 4;
    out.block_size_rule = "default";
  }
  if (out.block_size < scheduler::kMinDraftBlockSize || out.block_size > scheduler::kMaxDraftBlockSize)
    return invalid_argument("draft block size must be between " +
                            std::to_string(scheduler::kMinDraftBlockSize) + " and " +
                            std::to_string(scheduler::kMaxDraftBlockSize) + ", got " +
                            std::to_string(out.block_size) + " (from " + out.block_size_rule + ")");
  if (kind == speculative::DraftKind::draft) {
    TANDEM_ASSIGN_OR_RETURN(model::ModelConfig draft_config, model::load_config(options.dir));
    TANDEM_RETURN_IF_ERROR(
        speculative::DraftModelDrafter::check_compatible(target.dir(), target.config(), options.dir, draft_config));
    // check_compatible compares the tokenizers only when both directories ship one.
    for (const std::string& dir : {target.dir(), options.dir}) {
      if (std::ifstream(dir + "/tokenizer.json").good()) continue;
      spdlog::warn(
          "{}/tokenizer.json not found: the vocabularies of the drafter {} and the target {} could not be "
          "compared, only their vocab_size ({}); a drafter with another vocabulary still gives exact "
          "output, but its drafts would be rejected",
          dir, options.dir, target.dir(), target.config().vocab_size);
      break;
    }
    TANDEM_ASSIGN_OR_RETURN(auto d, speculative::DraftModelDrafter::load(options.dir, pool, options.max_tokens));
    out.drafter = std::move(d);
  } else {
    TANDEM_ASSIGN_OR_RETURN(auto d, speculative::MtpDrafter::load(options.dir, target, pool, options.max_tokens));
    out.drafter = std::move(d);
  }
  spdlog::info("drafter {} (kind {}, {}); block size {} from {}", options.dir, speculative::draft_kind_name(kind),
               options.kind.empty() ? "detected from config.json" : "from " + options.kind_rule,
               out.block_size, out.block_size_rule);
  return out;
}

Status apply_gemm_option(const std::string& gemm) {
  if (gemm.empty()) return Status::Ok();
  kernels::GemmMode mode;
  const std::string g = to_lower(trim(gemm));
  if (g == "invariant" || g == "auto") {
    mode =
        kernels::GemmMode::invariant;  // auto: the invariant kernel is tandem's per-shape pick on CPU today
  } else if (g == "splitk") {
    mode = kernels::GemmMode::splitk;
  } else {
    return invalid_argument("--gemm '" + gemm + "' is not one of: invariant, splitk, auto");
  }
  if (kernels::gemm_mode_pinned()) {
    if (kernels::gemm_mode() != mode)
      spdlog::warn("--gemm {} ignored: TANDEM_GEMM pins the matmul kernel to {}", g,
                   kernels::gemm_mode_name(kernels::gemm_mode()));
    return Status::Ok();
  }
  kernels::set_gemm_mode(mode);
  return Status::Ok();
}

}  // namespace tandem::app
