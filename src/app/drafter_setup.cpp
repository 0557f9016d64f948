#include "drafter_setup.h"

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "kernels/ops.h"
#include "spec/draft_model.h"
#include "spec/mtp.h"

namespace tandem::app {

void apply_drafter_env(DrafterOptions& o) {
  if (o.dir.empty()) o.dir = env_string("LLAMA_ARG_MODEL_DRAFT").value_or("");
  if (o.kind.empty()) o.kind = env_string("TANDEM_DRAFT_KIND").value_or("");
}

namespace {

// A width the drafter's config.json declares (draft_block_size, or
// num_speculative_tokens + 1), or 0.
int declared_block_size(const std::string& dir) {
  auto text = read_text_file(dir + "/config.json");
  if (!text.ok()) return 0;
  try {
    auto j = nlohmann::json::parse(*text);
    if (j.contains("draft_block_size") && j["draft_block_size"].is_number_integer()) return j["draft_block_size"].get<int>();
    if (j.contains("num_speculative_tokens") && j["num_speculative_tokens"].is_number_integer())
      return j["num_speculative_tokens"].get<int>() + 1;
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}

}  // namespace

Expected<LoadedDrafter> load_drafter(const DrafterOptions& options, const model::Model& target, ThreadPool* pool) {
  LoadedDrafter out;
  if (options.dir.empty()) return out;
  spec::DraftKind kind;
  if (!options.kind.empty()) {
    TANDEM_ASSIGN_OR_RETURN(kind, spec::parse_draft_kind(options.kind));
  } else {
    TANDEM_ASSIGN_OR_RETURN(kind, spec::detect_draft_kind(options.dir));
  }
  // Block size: flag > env > drafter config > default 4.
  if (options.block_size > 0) {
    out.block_size = options.block_size;
    out.block_size_rule = "--draft-block-size";
  } else if (auto env = env_string("TANDEM_DRAFT_BLOCK_SIZE")) {
    try {
      out.block_size = std::stoi(*env);
    } catch (...) {
      return invalid_argument("TANDEM_DRAFT_BLOCK_SIZE must be an integer, got '" + *env + "'");
    }
    out.block_size_rule = "TANDEM_DRAFT_BLOCK_SIZE";
  } else if (int declared = declared_block_size(options.dir); declared > 0) {
    out.block_size = declared;
    out.block_size_rule = "drafter config";
  } else {
    out.block_size = 4;
    out.block_size_rule = "default";
  }
  if (out.block_size < 2 || out.block_size > 16)
    return invalid_argument("draft block size must be between 2 and 16, got " + std::to_string(out.block_size) +
                            " (from " + out.block_size_rule + ")");
  if (kind == spec::DraftKind::draft) {
    TANDEM_ASSIGN_OR_RETURN(model::ModelConfig draft_config, model::load_config(options.dir));
    TANDEM_RETURN_IF_ERROR(spec::DraftModelDrafter::check_compatible(target.dir(), target.config(), options.dir, draft_config));
    TANDEM_ASSIGN_OR_RETURN(auto d, spec::DraftModelDrafter::load(options.dir, pool, options.max_tokens));
    out.drafter = std::move(d);
  } else {
    TANDEM_ASSIGN_OR_RETURN(auto d, spec::MtpDrafter::load(options.dir, target, pool, options.max_tokens));
    out.drafter = std::move(d);
  }
  spdlog::info("drafter {} (kind {}, {}); block size {} from {}", options.dir, spec::draft_kind_name(kind),
               options.kind.empty() ? "detected from config.json" : "from --draft-kind", out.block_size,
               out.block_size_rule);
  return out;
}

Status apply_gemm_option(const std::string& gemm) {
  if (gemm.empty()) return Status::Ok();
  kernels::GemmMode mode;
  const std::string g = to_lower(trim(gemm));
  if (g == "invariant" || g == "auto") {
    mode = kernels::GemmMode::invariant;  // auto: the invariant kernel is tandem's per-shape pick on CPU today
  } else if (g == "splitk") {
    mode = kernels::GemmMode::splitk;
  } else {
    return invalid_argument("--gemm '" + gemm + "' is not one of: invariant, splitk, auto");
  }
  if (kernels::gemm_mode_pinned()) {
    if (kernels::gemm_mode() != mode)
      spdlog::warn("--gemm {} ignored: TANDEM_GEMM pins the matmul kernel to {}", g, kernels::gemm_mode_name(kernels::gemm_mode()));
    return Status::Ok();
  }
  kernels::set_gemm_mode(mode);
  return Status::Ok();
}

}  // namespace tandem::app
