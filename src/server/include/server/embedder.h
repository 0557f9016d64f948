// Embedder: the forward pass behind POST /v1/embeddings (--embeddings).
//
// It owns a Forward and a KV cache of its own over the served target's
// weights (immutable after load, so sharing them with the engine thread is
// safe); the engine's Forward, KV cache and kernel pool are never touched.
// One mutex serialises callers: a request's inputs run on the calling HTTP
// thread with no kernel pool (one thread), so embeddings never take the
// engine's cores away from decoding for more than one request at a time
// (docs/adr/0018-embeddings.md). A caller's `keep_going` is asked while it
// waits for the mutex and before each forward, so a request whose client left
// (or whose deadline passed) neither waits its turn nor runs the rest of its batch.
//
// An embedding is the final hidden state (after the final RMSNorm) pooled
// over the input's tokens — the mean (default) or the last token's row —
// then L2-normalised, as llama-server's --embeddings answers /v1/embeddings.
// Every kernel is batch-invariant (ADR 0001) and pooling is a fixed-order
// per-input sum, so an input's vector is bitwise the same alone or in any
// batch. Errors (an input longer than the cache) come back as Status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace tandem::server {

enum class Pooling { mean, last };
const char* pooling_name(Pooling p);

// The model's own pooling, as sentence-transformers declares it in
// DIR/1_Pooling/config.json (pooling_mode_mean_tokens / pooling_mode_lasttoken,
// e.g. Qwen3-Embedding's last-token pooling); nullopt when the file is absent,
// unreadable or declares a mode tandem does not have (cls, max, ...).
std::optional<Pooling> declared_pooling(const std::string& dir);

class Embedder {
 public:
  // `max_tokens`: the longest input (the KV cache holds that many positions).
  static Expected<std::unique_ptr<Embedder>> create(const model::Model& model, int64_t max_tokens,
                                                    Pooling pooling);

  int64_t max_tokens() const { return max_tokens_; }
  Pooling pooling() const { return pooling_; }
  int64_t dimensions() const { return dimensions_; }
  // One normalised vector per input, in order. Inputs must be non-empty,
  // in-vocabulary and at most max_tokens() long (the caller checks; a
  // violation is InvalidArgument naming the input's index). `keep_going`
  // (optional) is polled every kPollMs while waiting for the embedder and
  // before each forward (a group of inputs that fit the cache together); once
  // it returns false, embed returns FailedPrecondition ("stopped after K of N inputs").
  Expected<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int32_t>>& inputs,
                                                  const std::function<bool()>& keep_going = {});
  static constexpr int kPollMs = 20;

 private:
  Embedder(const model::Model& model, model::KvCache kv, int64_t max_tokens, Pooling pooling);
  // Runs inputs [first, last) in one forward (they fit in the cache together).
  Status embed_group(const std::vector<std::vector<int32_t>>& inputs, size_t first, size_t last,
                     std::vector<std::vector<float>>& out);

  std::timed_mutex mu_;
  model::KvCache kv_;
  std::unique_ptr<model::Forward> forward_;
  int64_t max_tokens_;
  Pooling pooling_;
  int64_t dimensions_;
};

}  // namespace tandem::server
