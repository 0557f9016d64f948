#include "speculative/draft_model.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "model/config.h"

namespace tandem::speculative {
namespace {

using nlohmann::json;

// token -> id for the BPE vocabulary and the added tokens of a tokenizer.json.
struct VocabMap {
  json vocab;  // object token -> id
  json added;  // array of {id, content, special}
};

Expected<std::optional<VocabMap>> read_vocab(const std::string& dir) {
  auto text = read_text_file(dir + "/tokenizer.json");
  if (!text.ok()) return std::optional<VocabMap>{};  // no tokenizer: nothing to compare
  try {
    json j = json::parse(*text);
    VocabMap m;
    if (j.contains("model") && j["model"].contains("vocab")) m.vocab = j["model"]["vocab"];
    if (j.contains("added_tokens")) m.added = j["added_tokens"];
    return std::optional<VocabMap>(std::move(m));
  } catch (const json::exception& e) {
    return invalid_argument(dir + "/tokenizer.json: " + e.what());
  }
}

}  // namespace

Status DraftModelDrafter::check_compatible(const std::string& target_dir, const model::ModelConfig& target,
                                           const std::string& draft_dir, const model::ModelConfig& draft) {
  if (target.vocab_size != draft.vocab_size)
    return invalid_argument("drafter " + draft_dir + " has vocab_size " + std::to_string(draft.vocab_size) +
                            " but the target " + target_dir + " has " + std::to_string(target.vocab_size) +
                            "; a draft model must share the target's vocabulary");
  TANDEM_ASSIGN_OR_RETURN(auto tv, read_vocab(target_dir));
  TANDEM_ASSIGN_OR_RETURN(auto dv, read_vocab(draft_dir));
  if (!tv || !dv) return Status::Ok();
  if (tv->vocab.is_object() && dv->vocab.is_object()) {
    for (const auto& [token, id] : tv->vocab.items()) {
      auto it = dv->vocab.find(token);
      if (it == dv->vocab.end() || *it != id)
        return invalid_argument("drafter " + draft_dir + " maps token " + json(token).dump() + " to " +
                                (it == dv->vocab.end() ? std::string("nothing") : it->dump()) +
                                " but the target maps it to " + id.dump() + "; the tokenizers differ");
    }
  }
  auto added_ids = [](const json& added) {
    std::map<std::string, int64_t> m;
    if (added.is_array())
      for (const auto& t : added)
        if (t.contains("content") && t.contains("id"))
          m[t["content"].get<std::string>()] = t["id"].get<int64_t>();
    return m;
  };
  const auto ta = added_ids(tv->added), da = added_ids(dv->added);
  for (const auto& [content, id] : ta) {
    auto it = da.find(content);
    if (it == da.end() || it->second != id)
      return invalid_argument("drafter " + draft_dir + " maps special token " + json(content).dump() +
                              " to " +
                              (it == da.end() ? std::string("nothing") : std::to_string(it->second)) +
                              " but the target maps it to " + std::to_string(id));
  }
  return Status::Ok();
}

Expected<std::unique_ptr<DraftModelDrafter>> DraftModelDrafter::load(const std::string& dir, ThreadPool* pool,
                                                                     int64_t max_tokens) {
  TANDEM_ASSIGN_OR_RETURN(model::ModelConfig config, model::load_config(dir));
  return load(dir, std::move(config), pool, max_tokens);
}

Expected<std::unique_ptr<DraftModelDrafter>> DraftModelDrafter::load(const std::string& dir,
                                                                     model::ModelConfig config,
                                                                     ThreadPool* pool, int64_t max_tokens) {
  std::unique_ptr<DraftModelDrafter> d(new DraftModelDrafter());
  TANDEM_ASSIGN_OR_RETURN(d->model_, model::Model::load(dir, std::move(config)));
  TANDEM_ASSIGN_OR_RETURN(
      d->kv_, model::KvCache::create(d->model_->config(), model::KvCache::options_for_tokens(max_tokens)));
  d->forward_ = std::make_unique<model::Forward>(*d->model_, d->kv_, pool, 64);
  return d;
}

void DraftModelDrafter::reset() {
  if (seq_ >= 0) kv_.release(seq_);
  seq_ = -1;
  cached_.clear();
}

Expected<std::vector<int32_t>> DraftModelDrafter::propose(const DraftRequest& r) {
  std::vector<int32_t> drafts;
  if (r.count <= 0 || r.generated.empty()) return drafts;
  auto& committed = scratch_tokens_;
  committed.assign(r.prompt.begin(), r.prompt.end());
  committed.insert(committed.end(), r.generated.begin(), r.generated.end());
  if (seq_ < 0) {
    seq_ = kv_.create_sequence();
    cached_.clear();
  }
  // Keep the longest cached prefix, but always feed at least the last token.
  size_t common = 0;
  const size_t limit = std::min(cached_.size(), committed.size() - 1);
  while (common < limit && cached_[common] == committed[common]) ++common;
  kv_.truncate(seq_, static_cast<int64_t>(common));
  cached_.resize(common);

  auto feed = [&](std::span<const int32_t> tokens, int64_t start) -> Expected<model::ForwardOutput> {
    model::SequenceStep step{seq_, tokens, start, model::LogitRows::last};
    return forward_->run(std::span<const model::SequenceStep>(&step, 1));
  };
  const int64_t n = static_cast<int64_t>(committed.size());
  auto out = feed(std::span<const int32_t>(committed.data() + common, committed.size() - common),
                  static_cast<int64_t>(common));
  if (!out.ok()) {
    reset();
    return out.status();
  }
  cached_ = committed;
  auto& history = scratch_history_;
  history.assign(r.generated.begin(), r.generated.end());
  for (int32_t i = 0; i < r.count; ++i) {
    std::span<const float> row(out->logits_row(0), static_cast<size_t>(out->vocab));
    const int32_t token = sampler_.pick(row, *r.params, {r.prompt, history}, n + i);
    drafts.push_back(token);
    history.push_back(token);
    if (i + 1 == r.count) break;
    out = feed(std::span<const int32_t>(&drafts.back(), 1), n + i);
    if (!out.ok()) {
      reset();
      return out.status();
    }
    cached_.push_back(token);
  }
  return drafts;
}

}  // namespace tandem::speculative
