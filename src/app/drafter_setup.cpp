#include "drafter_setup.h"

#include "core/env.h"
#include "core/log.h"
#include "environment.h"
#include "kernels/ops.h"
#include "scheduler/metrics.h"

namespace tandem::app {

void add_drafter_options(CLI::App* sub, DrafterOptions& o, bool block_size) {
  sub->add_option(
      "--model-draft,--draft-model,--spec-draft-model", o.dir,
      "Drafter directory (-md): a small model, an MTP head, or the target itself for the MTP layers in its "
      "checkpoint (env LLAMA_ARG_MODEL_DRAFT, LLAMA_ARG_SPEC_DRAFT_MODEL)");
  sub->add_option_function<std::string>(
         "--draft-kind",
         [&o](const std::string& kind) {
           o.kind = kind;
           o.kind_rule = "--draft-kind";
         },
         "draft|mtp (default: detected from the drafter's config.json; env TANDEM_DRAFT_KIND); mtp without "
         "-md: "
         "the target's own MTP layers")
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
  if (o.dir.empty()) o.dir = variable("LLAMA_ARG_SPEC_DRAFT_MODEL").value_or("");
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
  // --draft-kind mtp alone drafts with the target's own MTP layers (runtime::load_drafter checks them).
  if (o.dir.empty() && to_lower(trim(o.kind)) != "mtp") {
    auto needs_drafter = [](const std::string& rule, const std::string& value) {
      const bool flag = rule.rfind("--", 0) == 0;
      return invalid_argument((flag ? rule + " " + value : rule + "='" + value + "'") +
                              " needs a drafter: give -md/--model-draft DIR (or LLAMA_ARG_MODEL_DRAFT), or "
                              "--draft-kind mtp for MTP layers inside the target's checkpoint");
    };
    if (o.block_size > 0) return needs_drafter(o.block_size_rule, std::to_string(o.block_size));
    if (!o.kind.empty()) return needs_drafter(o.kind_rule, o.kind);
  }
  return Status::Ok();
}

Expected<speculative::GemmRequest> resolve_gemm_option(const std::string& gemm) {
  speculative::GemmRequest request;
  if (auto pin = gemm_pin_from_env()) {
    request.mode = *pin;
    request.pinned = true;
  }
  if (gemm.empty()) return request;
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
  if (request.pinned) {
    if (request.mode != mode)
      spdlog::warn("--gemm {} ignored: TANDEM_GEMM pins the matmul kernel to {}", g,
                   kernels::gemm_mode_name(request.mode));
    return request;
  }
  request.mode = mode;
  return request;
}

Expected<speculative::GemmRequest> check_startup(DrafterOptions& drafter, const std::string& gemm) {
  TANDEM_RETURN_IF_ERROR(validate_environment());
  TANDEM_RETURN_IF_ERROR(resolve_drafter_options(drafter));
  return resolve_gemm_option(gemm);
}

}  // namespace tandem::app
