#include "model/config.h"
#include "runtime/opened_model.h"

namespace tandem::runtime {

speculative::ExactnessGate OpenedModel::gate(bool allow_inexact, speculative::GemmRequest gemm) const {
  return speculative::ExactnessGate::for_model(*model, pool.get(), allow_inexact, gemm);
}

Expected<OpenedModel> open_model(const OpenOptions& o) {
  OpenedModel out;
  TANDEM_ASSIGN_OR_RETURN(model::ModelConfig config, model::load_config(o.model_dir));
  config.weights = o.weights;
  TANDEM_ASSIGN_OR_RETURN(out.model, model::Model::load(o.model_dir, std::move(config), o.progress));
  TANDEM_ASSIGN_OR_RETURN(out.text, load_text_side(o.model_dir, out.model->config()));
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
