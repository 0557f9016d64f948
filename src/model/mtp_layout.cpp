#include "model/mtp_layout.h"

#include "model/model.h"

namespace tandem::model {

MtpLayout tandem_head_layout() {
  MtpLayout l;
  l.description = "tandem MTP head";
  l.block_prefix = "layer.";
  l.embedding_norm = "enorm.weight";
  l.hidden_norm = "hnorm.weight";
  l.projection = "eh_proj.weight";
  l.final_norm = "final_norm.weight";
  l.hidden_first = false;
  l.rope_offset = 1;
  return l;
}

MtpLayout mimo_layout(int index) {
  const std::string p = "model.mtp_layers." + std::to_string(index) + ".";
  MtpLayout l;
  l.description = "MiMo " + p.substr(0, p.size() - 1);
  l.block_prefix = p;
  l.embedding_norm = p + "token_layernorm.weight";
  l.hidden_norm = p + "hidden_layernorm.weight";
  l.projection = p + "input_proj.weight";
  l.final_norm = p + "final_layernorm.weight";
  l.hidden_first = true;
  l.rope_offset = 0;
  return l;
}

Expected<MtpLayout> find_embedded_mtp_layout(const Checkpoint& checkpoint, const ModelConfig& config) {
  if (checkpoint.find("model.mtp_layers.0.input_proj.weight")) return mimo_layout(0);
  const std::string deepseek = "model.layers." + std::to_string(config.num_layers) + ".eh_proj.weight";
  if (checkpoint.find(deepseek))
    return unimplemented(checkpoint.dir() + " holds DeepSeek-V3-style MTP layers (" + deepseek +
                         "), which tandem does not support: their decoder block uses MLA attention and a "
                         "mixture of experts");
  return not_found(checkpoint.dir() +
                   " holds no MTP layers (no tensor model.mtp_layers.0.input_proj.weight as in MiMo-7B)");
}

Expected<std::unique_ptr<Model>> Model::load_embedded_mtp_block(const Model& target,
                                                                const MtpLayout& layout) {
  if (target.config_.family == Family::gemma4)
    return unimplemented(target.dir_ + ": MTP layers inside a gemma4_text checkpoint are not supported");
  std::unique_ptr<Model> m(new Model());
  m->dir_ = target.dir_;
  // The block is one more decoder layer of the target's own shapes (MiMo builds it from the
  // target's config, as its layer 0 for the attention type).
  m->config_ = target.config_;
  m->config_.num_layers = 1;
  m->config_.tie_word_embeddings = true;
  m->config_.layer_window = {target.config_.layer_window.empty() ? 0 : target.config_.layer_window[0]};
  const int64_t h = m->config_.hidden_size;
  // A second mapping of the same files: the pages are shared, only address space is spent.
  TANDEM_ASSIGN_OR_RETURN(m->checkpoint_, Checkpoint::open_dir(target.dir_));
  TANDEM_ASSIGN_OR_RETURN(const TensorView* norm, m->checkpoint_.get(layout.final_norm, {h}));
  m->final_norm_.resize(static_cast<size_t>(h));
  kernels::to_f32(norm->data, norm->dtype, h, m->final_norm_.data());
  m->embedding_ = target.embedding_;
  m->lm_head_ref_ = &target.lm_head();
  m->borrowed_from_ = &target;  // on a device, the block reads the target's embedding and LM head there
  m->layers_.resize(1);
  TANDEM_RETURN_IF_ERROR(m->load_layer(0, layout.block_prefix));
  m->inv_freq_ = target.inv_freq_;
  return m;
}

}  // namespace tandem::model
