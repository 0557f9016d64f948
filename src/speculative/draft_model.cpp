#include "speculative/draft_model.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/mapped_file.h"
#include "model/config.h"
#include "speculative/pick.h"

namespace tandem::speculative {
namespace {

// DIR's tokenizer, when it ships tokenizer.json (malformed: an error).
Expected<std::optional<tok::Tokenizer>> tokenizer_of(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  if (!std::ifstream(path).good()) return std::optional<tok::Tokenizer>{};
  TANDEM_ASSIGN_OR_RETURN(tok::Tokenizer t, tok::Tokenizer::from_file(path));
  return std::optional<tok::Tokenizer>(std::move(t));
}

std::string quoted(const std::string& token) { return nlohmann::json(token).dump(); }

}  // namespace

Status DraftModelDrafter::check_compatible(const std::string& target_dir, const model::ModelConfig& target,
                                           const std::string& draft_dir, const model::ModelConfig& draft) {
  TANDEM_ASSIGN_OR_RETURN(auto target_tokenizer, tokenizer_of(target_dir));
  TANDEM_ASSIGN_OR_RETURN(auto draft_tokenizer, tokenizer_of(draft_dir));
  return check_compatible(target_dir, target, target_tokenizer ? &*target_tokenizer : nullptr, draft_dir,
                          draft, draft_tokenizer ? &*draft_tokenizer : nullptr);
}

Status DraftModelDrafter::check_compatible(const std::string& target_dir, const model::ModelConfig& target,
                                           const tok::Tokenizer* target_tokenizer,
                                           const std::string& draft_dir, const model::ModelConfig& draft,
                                           const tok::Tokenizer* draft_tokenizer) {
  if (target.vocab_size != draft.vocab_size)
    return invalid_argument("drafter " + draft_dir + " has vocab_size " + std::to_string(draft.vocab_size) +
                            " but the target " + target_dir + " has " + std::to_string(target.vocab_size) +
                            "; a draft model must share the target's vocabulary");
  if (!target_tokenizer || !draft_tokenizer) return Status::Ok();
  // Every token of the target (base vocabulary and added tokens) must have the same id in the drafter's.
  for (int32_t id = 0; id < target_tokenizer->vocab_size(); ++id) {
    const std::optional<std::string> token = target_tokenizer->id_to_token(id);
    if (!token) continue;
    const std::optional<int32_t> theirs = draft_tokenizer->token_to_id(*token);
    if (theirs == id) continue;
    const std::string mapped = theirs ? std::to_string(*theirs) : std::string("nothing");
    if (target_tokenizer->is_special(id))
      return invalid_argument("drafter " + draft_dir + " maps special token " + quoted(*token) + " to " +
                              mapped + " but the target maps it to " + std::to_string(id));
    return invalid_argument("drafter " + draft_dir + " maps token " + quoted(*token) + " to " + mapped +
                            " but the target maps it to " + std::to_string(id) + "; the tokenizers differ");
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
                                                                     ThreadPool* pool, int64_t max_tokens,
                                                                     const model::Placement& placement) {
  std::unique_ptr<DraftModelDrafter> d(new DraftModelDrafter());
  TANDEM_ASSIGN_OR_RETURN(d->model_, model::Model::load(dir, std::move(config)));
  TANDEM_RETURN_IF_ERROR(d->model_->place_on(placement));
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

  // The last row's pick is the token at `start + tokens.size()`; drafts need no logprobs.
  std::vector<kernels::PickRule> rules;
  // chain: another draft step follows this one; on a GPU it is queued ahead (ADR 0090).
  auto feed = [&](std::span<const int32_t> tokens, int64_t start,
                  bool chain = false) -> Expected<model::ForwardOutput> {
    model::SequenceStep step{seq_, tokens, start, model::LogitRows::last};
    model::ForwardOptions options =
        pick_options(*r.params, false, start + static_cast<int64_t>(tokens.size()), 1, rules);
    options.chain = chain;
    return forward_->run(std::span<const model::SequenceStep>(&step, 1), options);
  };
  const int64_t n = static_cast<int64_t>(committed.size());
  auto out = feed(std::span<const int32_t>(committed.data() + common, committed.size() - common),
                  static_cast<int64_t>(common), r.count >= 2);
  if (!out.ok()) {
    reset();
    return out.status();
  }
  cached_ = committed;
  auto& history = scratch_history_;
  history.assign(r.generated.begin(), r.generated.end());
  for (int32_t i = 0; i < r.count; ++i) {
    const int32_t token = pick_row(sampler_, *out, 0, *r.params, {r.prompt, history}, n + i);
    if (token == sampling::kNoToken) break;  // nothing allowed here: the verify row will say so
    drafts.push_back(token);
    history.push_back(token);
    if (i + 1 == r.count) break;
    out = feed(std::span<const int32_t>(&drafts.back(), 1), n + i, i + 2 < r.count);
    if (!out.ok()) {
      reset();
      return out.status();
    }
    cached_.push_back(token);
  }
  return drafts;
}

}  // namespace tandem::speculative
