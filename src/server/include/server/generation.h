// GenerationRun: one OpenAI completion request in flight — n engine
// requests (one per choice), their detokenizers and stop matchers, and the
// OpenAI response shapes for both endpoints, streamed (SSE) or whole.
//
// Created by Service::start_generation on an HTTP worker thread and driven
// by that thread only. If the client goes away, cancel() (or the
// destructor) cancels every engine request so the engine frees their KV at
// its next step; the choices not finished by then count as "abort".
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/request.h"
#include "server/api_error.h"
#include "server/metrics_text.h"
#include "server/openai_request.h"
#include "server/slot_board.h"
#include "server/stop_matcher.h"
#include "tokenizer/streaming.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

class GenerationRun {
 public:
  struct Choice {
    std::shared_ptr<scheduler::EngineRequest> request;
    std::optional<tok::StreamingDetokenizer> detok;
    StopMatcher stop;
    std::string text;
    std::vector<scheduler::GeneratedToken> tokens;
    scheduler::FinishReason finish = scheduler::FinishReason::none;
    scheduler::RequestStats stats;
    Status error;
    bool sent_role = false;
    size_t streamed = 0;      // bytes of `text` sent so far (tool calls hold some back)
    bool tool_calls = false;  // the reply carried tool calls: finish_reason "tool_calls"
  };

  // `metrics` (optional) counts each choice once, by the finish_reason its client is told.
  GenerationRun(GenerationRequest request, std::string id, std::string model, int64_t prompt_tokens,
                const tok::Tokenizer* tokenizer, std::vector<Choice> choices,
                ServerMetrics* metrics = nullptr);
  ~GenerationRun();

  bool stream() const { return request_.stream; }
  // Non-streaming: waits for every choice and returns the HTTP status and body.
  // `alive` (optional) is polled while waiting; when it turns false the run
  // is cancelled and collect() returns early (status 499, no useful body).
  std::pair<int, std::string> collect(const std::function<bool()>& alive = {});
  // Streaming: writes SSE events ("data: ...\n\n") through `write` until the
  // end ("data: [DONE]"). `write` returns false when the client is gone,
  // which cancels the run. Returns false if it ended because of that.
  // `client_alive` (optional) is polled while no event is due, so a client that
  // left a request still queued or prefilling is noticed before its first token.
  bool pump(const std::function<bool(const std::string&)>& write,
            const std::function<bool()>& client_alive = {});
  void cancel();

  // For the llama-server and Ollama response shapes (llama_completion.cpp,
  // ollama_api.cpp), which format the choices themselves:
  // waits for every choice; false when `alive` turned false (the run is then cancelled).
  bool wait(const std::function<bool()>& alive = {});
  // Streams choice 0's text: calls on_text(delta) for every non-empty piece
  // until it finishes. on_text returning false (client gone) cancels the run;
  // so does `client_alive` turning false while no text is due. Returns false
  // when it ended because of either.
  bool stream_text(const std::function<bool(const std::string&)>& on_text,
                   const std::function<bool()>& client_alive = {});
  const std::vector<Choice>& choices() const { return choices_; }
  const GenerationRequest& request() const { return request_; }
  const std::string& id() const { return id_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  const tok::Tokenizer* tokenizer() const { return tokenizer_; }
  // llama-server's timings object (prompt_n, prompt_ms, predicted_n, ...).
  nlohmann::json timings() const;
  // "stop", "length", "abort" or (a tool call was parsed) "tool_calls".
  const char* finish_name(const Choice& c) const;
  // The error of a choice that finished with one (generation_error): a dead end names the
  // request field behind it (dead_end_param). The same body for n = 1 and n > 1.
  ApiError error_of(const Choice& c) const;
  // The /slots entry this run holds (none: it waits in the engine's queue); it
  // is given back when every choice has finished (or the run is destroyed).
  void set_lease(std::unique_ptr<SlotBoard::Lease> lease) {
    lease_ = std::move(lease);
    slot_ = lease_ ? lease_->slot() : -1;
  }
  int32_t slot() const { return slot_; }
  // Special tokens whose text stays in the choices' text (the detokenizer
  // skips the others): tool-call markers such as Mistral's [TOOL_CALLS].
  void keep_special_tokens(std::vector<int32_t> ids) { kept_special_ = std::move(ids); }

 private:
  // Pulls pending updates of choice i (waiting up to `timeout`); returns the
  // new text to emit (after stop matching) and appends token details.
  std::string advance(size_t i, std::chrono::milliseconds timeout, std::vector<size_t>* new_tokens = nullptr);
  nlohmann::json usage() const;
  int64_t cached_tokens() const;
  nlohmann::json logprobs_json(const Choice& c, size_t from, size_t to) const;
  std::string token_text(int32_t id) const;
  // Streaming with tools: what of `fresh` may go out as content now; at the
  // finish, also the tool_calls delta (null when none). After an error, all
  // the text held back, as content (not parsed: no complete reply).
  std::string tool_stream(size_t i, std::string fresh, nlohmann::json& calls_delta);
  // Sets the choice's finish reason (once) and counts it in metrics_.
  void finish(Choice& c, scheduler::FinishReason reason);

  GenerationRequest request_;
  std::string id_, model_;
  int64_t prompt_tokens_;
  int64_t created_;
  const tok::Tokenizer* tokenizer_;
  std::vector<Choice> choices_;
  ServerMetrics* metrics_;
  std::unique_ptr<SlotBoard::Lease> lease_;
  std::vector<int32_t> kept_special_;
  int32_t slot_ = -1;  // id_slot in llama-server's replies (kept after the lease is given back)
};

// The request field whose constraint left no allowed token (`status` from sampling's
// no_allowed_token, sampling/dead_end.h): "logit_bias", or the field the grammar came from
// (structured.grammar_source: "grammar", "json_schema", "response_format", "format", "tools",
// "tool_choice"). None for the server's own grammar (no field of the request), the penalties'
// overflow, or any other Status.
std::optional<std::string> dead_end_param(const Status& status, const StructuredRequest& structured);

// Serializes JSON for the wire; invalid UTF-8 is replaced, never thrown.
std::string dump_json(const nlohmann::json& j);

}  // namespace tandem::server
