// Service: everything the HTTP routes need, independent of the HTTP library.
//
// Owns the engine (once loaded), the tokenizer and chat template, the API
// keys and the served model's id. Each route is a method returning an
// HttpReply (status, content type, body) or, for streaming generation, a
// GenerationRun the adapter pumps into the socket. Thread-safe: HTTP worker
// threads call it concurrently; the engine is touched only through submit()
// and request channels; readiness flips once, atomically.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/opened_model.h"
#include "scheduler/engine.h"
#include "server/api_error.h"
#include "server/api_keys.h"
#include "server/embedder.h"
#include "server/metrics_text.h"
#include "server/openai_request.h"
#include "server/request_defaults.h"
#include "server/token_trie_cache.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

HttpReply error_reply(const ApiError& error);

// The opened model the routes serve (runtime/opened_model.h): the engine,
// tokenizer, chat template and stop ids, all from runtime::open_model.
using runtime::ServedModel;

class GenerationRun;
class SlotBoard;

// How a request's `model` field is matched against the served id.
//   strict (default, vLLM's and OpenAI's answer): an unknown name is a 404
//     model_not_found; an absent or empty one means the served model.
//   any (llama-server's): every name is served by the one model.
// --model-match / TANDEM_MODEL_MATCH chooses (docs/adr/0017-compat-endpoints.md).
enum class ModelMatch { strict, any };

class Service {
 public:
  Service(std::string model_id, ApiKeys keys, size_t max_body_bytes);
  ~Service();

  // Before attach(): the matching rule for `model`, the model directory (GET
  // /props, /api/show) and whether /v1/embeddings is served (--embeddings).
  void set_model_match(ModelMatch match) { model_match_ = match; }
  void set_model_path(std::string path) { model_path_ = std::move(path); }
  void set_embeddings(bool enabled, Pooling pooling = Pooling::mean) {
    embeddings_enabled_ = enabled;
    pooling_ = pooling;
  }
  // Called once when the model is loaded; afterwards ready() is true.
  // `defaults`: what a request that omits a sampling field or max_tokens gets.
  void attach(ServedModel served, RequestDefaults defaults = {});
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  const std::string& model_id() const { return model_id_; }
  const ApiKeys& keys() const { return keys_; }
  size_t max_body_bytes() const { return max_body_bytes_; }
  scheduler::Engine* engine() { return ready() ? served_.engine.get() : nullptr; }
  // Stop accepting generation requests (shutdown began).
  void begin_shutdown() { shutting_down_.store(true); }

  HttpReply health() const;
  HttpReply models() const;
  // GET /v1/models/{id}: the model object, or a 404 model_not_found.
  HttpReply model(const std::string& id) const;
  HttpReply metrics() const;
  // GET /v1/internal/mtp-policy (schema_version 1); worker_not_ready until the engine publishes.
  HttpReply mtp_policy() const;
  nlohmann::json mtp_policy_json() const;

  // Parses and validates; on success returns a run ready to stream or collect.
  std::variant<std::unique_ptr<GenerationRun>, ApiError> start_generation(Endpoint endpoint,
                                                                          const std::string& body);
  // The same from a request another route parsed (llama-server's /completion,
  // Ollama's /api/generate and /api/chat). `add_special`: a text prompt gets
  // the tokenizer's special tokens (BOS).
  std::variant<std::unique_ptr<GenerationRun>, ApiError> start_request(GenerationRequest req,
                                                                       bool add_special = true);
  // Renders chat messages (and tools) with the model's chat template; 400 when
  // there is none or it fails.
  std::variant<std::string, ApiError> render_chat(const nlohmann::json& messages, const nlohmann::json& tools,
                                                  bool add_generation_prompt) const;
  // The same with key order kept (structured requests: tools and schemas print as sent).
  std::variant<std::string, ApiError> render_chat_ordered(nlohmann::ordered_json messages,
                                                          nlohmann::ordered_json tools,
                                                          bool add_generation_prompt) const;
  // Whether `name` (a request's `model`) names the served model under the
  // matching rule; Ollama's ":latest" tag is ignored.
  bool model_matches(const std::string& name) const;

  // For the llama-server, Ollama and embeddings routes; valid once ready().
  const ServedModel& served() const { return served_; }
  const std::string& model_path() const { return model_path_; }
  const RequestDefaults& defaults() const { return defaults_; }
  int64_t created() const { return created_; }
  SlotBoard* slots() const { return slots_.get(); }
  // Null when --embeddings is off.
  Embedder* embedder() const { return embedder_.get(); }

 private:
  std::string model_id_;
  ApiKeys keys_;
  size_t max_body_bytes_;
  ServedModel served_;
  RequestDefaults defaults_;  // set by attach, before ready_
  std::atomic<bool> ready_{false};
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> next_id_{1};
  TokenTrieCache token_trie_;  // for structured outputs (grammar masks)
  ServerMetrics metrics_;      // finish reasons as told to the clients; GET /metrics
  int64_t created_;
  ModelMatch model_match_ = ModelMatch::strict;
  std::string model_path_;
  bool embeddings_enabled_ = false;
  Pooling pooling_ = Pooling::mean;
  std::unique_ptr<SlotBoard> slots_;
  std::unique_ptr<Embedder> embedder_;
};

}  // namespace tandem::server
