#include "server/embedder.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tandem::server {

const char* pooling_name(Pooling p) { return p == Pooling::mean ? "mean" : "last"; }

std::optional<Pooling> declared_pooling(const std::string& dir) {
  std::ifstream in(dir + "/1_Pooling/config.json");
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto on = [&](const char* key) { return j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); };
  const bool mean = on("pooling_mode_mean_tokens"), last = on("pooling_mode_lasttoken");
  const bool other = on("pooling_mode_cls_token") || on("pooling_mode_max_tokens") ||
                     on("pooling_mode_mean_sqrt_len_tokens") || on("pooling_mode_weightedmean_tokens");
  if (other || mean == last) return std::nullopt;
  return mean ? Pooling::mean : Pooling::last;
}

Expected<std::unique_ptr<Embedder>> Embedder::create(const model::Model& model, int64_t max_tokens,
                                                     Pooling pooling) {
  if (max_tokens < 1) return invalid_argument("embeddings: the context must hold at least one token");
  TANDEM_ASSIGN_OR_RETURN(
      auto kv, model::KvCache::create(model.config(), model::KvCache::options_for_tokens(max_tokens)));
  return std::unique_ptr<Embedder>(new Embedder(model, std::move(kv), max_tokens, pooling));
}

Embedder::Embedder(const model::Model& model, model::KvCache kv, int64_t max_tokens, Pooling pooling)
    : kv_(std::move(kv)),
      max_tokens_(max_tokens),
      pooling_(pooling),
      dimensions_(model.config().hidden_size) {
  forward_ = std::make_unique<model::Forward>(model, kv_, nullptr);
}

Expected<std::vector<std::vector<float>>> Embedder::embed(const std::vector<std::vector<int32_t>>& inputs,
                                                          const std::function<bool()>& keep_going) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].empty() || static_cast<int64_t>(inputs[i].size()) > max_tokens_)
      return invalid_argument("input[" + std::to_string(i) + "] has " + std::to_string(inputs[i].size()) +
                              " tokens; an input must have 1 to " + std::to_string(max_tokens_));
  auto stopped = [&](size_t done) {
    return failed_precondition("stopped after " + std::to_string(done) + " of " +
                               std::to_string(inputs.size()) + " inputs");
  };
  std::unique_lock<std::timed_mutex> lock(mu_, std::defer_lock);
  while (!lock.try_lock_for(std::chrono::milliseconds(kPollMs)))
    if (keep_going && !keep_going()) return stopped(0);
  std::vector<std::vector<float>> out(inputs.size());
  // Inputs are packed into forwards while their blocks fit the cache; the
  // grouping changes no bit of any result (batch invariance).
  size_t first = 0;
  while (first < inputs.size()) {
    size_t last = first;
    int64_t blocks = 0;
    while (last < inputs.size()) {
      const int64_t need = kv_.blocks_for(static_cast<int64_t>(inputs[last].size()));
      if (last > first && blocks + need > kv_.num_blocks()) break;
      blocks += need;
      ++last;
    }
    if (keep_going && !keep_going()) return stopped(first);
    TANDEM_RETURN_IF_ERROR(embed_group(inputs, first, last, out));
    first = last;
  }
  return out;
}

Status Embedder::embed_group(const std::vector<std::vector<int32_t>>& inputs, size_t first, size_t last,
                             std::vector<std::vector<float>>& out) {
  std::vector<model::SequenceStep> steps;
  for (size_t i = first; i < last; ++i) {
    model::SequenceStep s;
    s.seq = kv_.create_sequence();
    s.tokens = inputs[i];
    s.start_position = 0;
    s.logits = model::LogitRows::none;
    steps.push_back(s);
  }
  model::ForwardOptions options;
  options.hidden = model::HiddenOutput::after_final_norm;
  options.hidden_all_rows = true;
  auto result = forward_->run(steps, options);
  for (const auto& s : steps) kv_.release(s.seq);
  if (!result.ok()) return result.status();
  const int64_t hs = dimensions_;
  int64_t row = 0;
  for (size_t i = first; i < last; ++i) {
    const int64_t n = static_cast<int64_t>(inputs[i].size());
    std::vector<double> sum(static_cast<size_t>(hs), 0.0);
    const int64_t from = pooling_ == Pooling::mean ? 0 : n - 1;
    for (int64_t r = from; r < n; ++r) {
      const float* h = result->hidden.data() + (row + r) * hs;
      for (int64_t d = 0; d < hs; ++d) sum[static_cast<size_t>(d)] += h[d];
    }
    const double count = static_cast<double>(n - from);
    double norm = 0.0;
    for (double& v : sum) {
      v /= count;
      norm += v * v;
    }
    norm = std::sqrt(norm);
    std::vector<float>& e = out[i];
    e.resize(static_cast<size_t>(hs));
    for (int64_t d = 0; d < hs; ++d)
      e[static_cast<size_t>(d)] = static_cast<float>(norm > 0 ? sum[static_cast<size_t>(d)] / norm : 0.0);
    row += n;
  }
  return Status::Ok();
}

}  // namespace tandem::server
