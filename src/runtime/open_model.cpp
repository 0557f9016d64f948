#include "core/log.h"
#include "model/config.h"
#include "model/device.h"
#include "model/gguf_model.h"
#include "runtime/gguf_text_side.h"
#include "runtime/opened_model.h"

namespace tandem::runtime {

speculative::ExactnessGate OpenedModel::gate(bool allow_inexact, speculative::GemmRequest gemm) const {
  return speculative::ExactnessGate::for_model(*model, pool.get(), allow_inexact, gemm);
}

namespace {

Status place_target(model::Model& target, const std::string& device) {
  bool is_auto = false;
  TANDEM_ASSIGN_OR_RETURN(model::Placement placement, model::parse_device(device, &is_auto));
  if (is_auto) {
    if (!model::cuda_available()) return Status::Ok();  // cpu
    placement = model::Placement{model::DeviceKind::cuda, 0};
  }
  Status placed = target.place_on(placement);
  if (placed.ok()) {
    spdlog::info("forward on {}", model::device_name(placement));
    return Status::Ok();
  }
  // auto: a model the GPU backend cannot take (a feature it lacks) stays on the CPU; said once.
  if (is_auto && placed.code() == StatusCode::kFailedPrecondition) {
    spdlog::info("forward on cpu ({}; --device cuda makes this an error)", placed.message());
    return Status::Ok();
  }
  return placed;
}

// A GGUF file is opened and parsed once: config, tensors and text side all come from it.
Status open_gguf(const OpenOptions& o, OpenedModel& out) {
  TANDEM_ASSIGN_OR_RETURN(model::GgufFile parsed, model::GgufFile::open(o.model_dir));
  auto file = std::make_shared<const model::GgufFile>(std::move(parsed));
  TANDEM_ASSIGN_OR_RETURN(model::ModelConfig config, model::gguf_config(*file));
  TANDEM_ASSIGN_OR_RETURN(model::Checkpoint checkpoint, model::gguf_checkpoint(file, config));
  TANDEM_ASSIGN_OR_RETURN(out.model,
                          model::Model::load(std::move(checkpoint), std::move(config), o.progress));
  TANDEM_ASSIGN_OR_RETURN(out.text, load_gguf_text_side(*file, out.model->config(), o.chat_template));
  return Status::Ok();
}

}  // namespace

Expected<OpenedModel> open_model(const OpenOptions& o) {
  OpenedModel out;
  if (model::is_gguf_path(o.model_dir)) {
    TANDEM_RETURN_IF_ERROR(open_gguf(o, out));
    TANDEM_RETURN_IF_ERROR(place_target(*out.model, o.device));
  } else {
    TANDEM_ASSIGN_OR_RETURN(model::ModelConfig config, model::load_config(o.model_dir));
    config.weights = o.weights;
    TANDEM_ASSIGN_OR_RETURN(out.model, model::Model::load(o.model_dir, std::move(config), o.progress));
    TANDEM_RETURN_IF_ERROR(place_target(*out.model, o.device));
    TANDEM_ASSIGN_OR_RETURN(out.text, load_text_side(o.model_dir, out.model->config(), o.chat_template));
  }
  if (o.pool_for_one_thread || o.threads > 1) out.pool = std::make_unique<ThreadPool>(o.threads);
  TANDEM_RETURN_IF_ERROR(open_drafter(out, o.drafter));
  return out;
}

Status open_drafter(OpenedModel& opened, const DrafterOptions& options) {
  DrafterOptions with_weights = options;
  with_weights.weights = opened.model->config().weights;  // a draft model follows the target's --weights
  TANDEM_ASSIGN_OR_RETURN(
      opened.drafter, load_drafter(with_weights, *opened.model, opened.text.tokenizer, opened.pool.get()));
  return Status::Ok();
}

Expected<ServedModel> make_served_model(OpenedModel opened, scheduler::EngineConfig config) {
  ServedModel served;
  static_cast<TextSide&>(served) = std::move(opened.text);
  config.block_size = opened.drafter.block_size;
  TANDEM_ASSIGN_OR_RETURN(
      served.engine, scheduler::Engine::create(config, std::move(opened.model),
                                               std::move(opened.drafter.drafter), std::move(opened.pool)));
  return served;
}

}  // namespace tandem::runtime
