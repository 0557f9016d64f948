#include "server/generation.h"

#include <algorithm>
#include <ctime>

#include "sampling/dead_end.h"
#include "server/api_error.h"
#include "server/tool_call_reply.h"

namespace tandem::server {

using nlohmann::json;
using scheduler::FinishReason;

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

GenerationRun::GenerationRun(GenerationRequest request, std::string id, std::string model,
                             int64_t prompt_tokens, const tok::Tokenizer* tokenizer,
                             std::vector<Choice> choices, ServerMetrics* metrics)
    : request_(std::move(request)),
      id_(std::move(id)),
      model_(std::move(model)),
      prompt_tokens_(prompt_tokens),
      created_(static_cast<int64_t>(std::time(nullptr))),
      tokenizer_(tokenizer),
      choices_(std::move(choices)),
      metrics_(metrics) {}

GenerationRun::~GenerationRun() { cancel(); }

std::optional<std::string> dead_end_param(const Status& status, const StructuredRequest& structured) {
  switch (sampling::dead_end_cause(status)) {
    case sampling::DeadEndCause::logit_bias:
      return "logit_bias";
    case sampling::DeadEndCause::grammar:
      if (structured.grammar_source.empty() || structured.grammar_source == "server") return std::nullopt;
      return structured.grammar_source;
    default:
      return std::nullopt;
  }
}

ApiError GenerationRun::error_of(const Choice& c) const {
  return generation_error(c.error, dead_end_param(c.error, request_.structured));
}

void GenerationRun::cancel() {
  for (auto& c : choices_) {
    if (c.finish != FinishReason::none) continue;
    c.request->channel->cancel();
    finish(c, FinishReason::cancelled);
  }
}

void GenerationRun::finish(Choice& c, FinishReason reason) {
  if (c.finish != FinishReason::none) return;
  c.finish = reason;
  // The slot is free once every choice has finished, before the last events are
  // written: a client that saw its reply end never finds its request in /slots.
  if (lease_ && std::all_of(choices_.begin(), choices_.end(),
                            [](const Choice& other) { return other.finish != FinishReason::none; }))
    lease_.reset();
  if (!metrics_) return;
  switch (reason) {
    case FinishReason::stop:
      metrics_->finished_stop++;
      break;
    case FinishReason::length:
      metrics_->finished_length++;
      break;
    case FinishReason::cancelled:
      metrics_->finished_abort++;
      break;
    default:
      break;  // errors: the engine's request_failure_total
  }
}

std::string GenerationRun::token_text(int32_t id) const {
  if (!tokenizer_) return "<" + std::to_string(id) + ">";
  const int32_t one[1] = {id};
  return tokenizer_->decode_raw(one);
}

const char* GenerationRun::finish_name(const Choice& c) const {
  if (c.tool_calls && c.finish == FinishReason::stop) return "tool_calls";
  switch (c.finish) {
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "abort";
    default:
      return "stop";
  }
}

std::string GenerationRun::advance(size_t i, std::chrono::milliseconds timeout,
                                   std::vector<size_t>* new_tokens) {
  Choice& c = choices_[i];
  std::vector<scheduler::RequestUpdate> updates;
  c.request->channel->pop_all(updates, timeout);
  std::string out;
  for (auto& u : updates) {
    if (c.finish != FinishReason::none) break;  // stopped by a stop string: ignore the rest
    for (auto& t : u.tokens) {
      if (c.stop.stopped()) break;
      if (new_tokens) new_tokens->push_back(c.tokens.size());
      c.tokens.push_back(t);
      if (!c.detok) continue;
      if (std::find(kept_special_.begin(), kept_special_.end(), t.token) != kept_special_.end()) {
        // Text held for an incomplete character comes out first, then the marker.
        out += c.stop.push(c.detok->flush());
        out += c.stop.push(token_text(t.token));
      } else {
        out += c.stop.push(c.detok->push(t.token));
      }
    }
    if (c.stop.stopped()) {
      // Logprobs cover only tokens whose text starts before the stop string.
      size_t offset = 0, keep = 0;
      const size_t emitted = c.text.size() + out.size();
      while (keep < c.tokens.size() && offset < emitted) offset += token_text(c.tokens[keep++].token).size();
      c.tokens.resize(keep);
      finish(c, FinishReason::stop);  // the engine sees a cancelled request; the client a stop
      c.stats = u.stats;
      c.request->channel->cancel();  // the engine frees its KV at the next step
      break;
    }
    if (u.finish != FinishReason::none) {
      if (c.detok) out += c.stop.push(c.detok->flush());
      out += c.stop.flush();
      c.error = u.error;
      c.stats = u.stats;
      finish(c, u.finish);  // cancelled here means the server cut it (shutdown): reported as "abort"
    }
  }
  c.text += out;
  if (lease_ && i == 0) lease_->set_decoded(static_cast<int64_t>(c.tokens.size()));
  return out;
}

bool GenerationRun::wait(const std::function<bool()>& alive) {
  for (;;) {
    if (alive && !alive()) {
      cancel();
      return false;
    }
    bool all_done = true;
    for (size_t i = 0; i < choices_.size(); ++i) {
      if (choices_[i].finish != FinishReason::none) continue;
      all_done = false;
      advance(i, std::chrono::milliseconds(50));
    }
    if (all_done) return true;
  }
}

bool GenerationRun::stream_text(const std::function<bool(const std::string&)>& on_text,
                                const std::function<bool()>& client_alive) {
  Choice& c = choices_.front();
  while (c.finish == FinishReason::none) {
    const std::string text = advance(0, std::chrono::milliseconds(50));
    if (!text.empty()) {
      if (!on_text(text)) {
        cancel();
        return false;
      }
    } else if (c.finish == FinishReason::none && client_alive && !client_alive()) {
      cancel();
      return false;
    }
  }
  return true;
}

// The prompt is billed once for all n choices: its cached part is what the
// least lucky choice reused.
int64_t GenerationRun::cached_tokens() const {
  int64_t cached = prompt_tokens_;
  for (const auto& c : choices_) cached = std::min(cached, c.stats.cached_tokens);
  return choices_.empty() ? 0 : cached;
}

json GenerationRun::usage() const {
  int64_t completion = 0, drafted = 0, accepted = 0;
  for (const auto& c : choices_) {
    completion += static_cast<int64_t>(c.tokens.size());
    drafted += c.stats.draft_tokens;
    accepted += c.stats.accepted_tokens;
  }
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion},
          {"total_tokens", prompt_tokens_ + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens()}}},
          {"completion_tokens_details",
           {{"accepted_prediction_tokens", accepted}, {"rejected_prediction_tokens", drafted - accepted}}}};
}

json GenerationRun::timings() const {
  int64_t predicted = 0, drafted = 0, accepted = 0;
  double prompt_ms = 0, predicted_ms = 0;
  for (const auto& c : choices_) {
    predicted += static_cast<int64_t>(c.tokens.size());
    drafted += c.stats.draft_tokens;
    accepted += c.stats.accepted_tokens;
    prompt_ms = std::max(prompt_ms, c.stats.prompt_ms);
    predicted_ms = std::max(predicted_ms, c.stats.decode_ms);
  }
  auto per_second = [](int64_t n, double ms) { return ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0; };
  // llama-server's split: prompt_n tokens were prefilled, cache_n reused.
  const int64_t cached = cached_tokens();
  return {{"cache_n", cached},
          {"prompt_n", prompt_tokens_ - cached},
          {"prompt_ms", prompt_ms},
          {"prompt_per_second", per_second(prompt_tokens_ - cached, prompt_ms)},
          {"predicted_n", predicted},
          {"predicted_ms", predicted_ms},
          {"predicted_per_second", per_second(predicted > 0 ? predicted - 1 : 0, predicted_ms)},
          {"draft_n", drafted},
          {"draft_n_accepted", accepted}};
}

json GenerationRun::logprobs_json(const Choice& c, size_t from, size_t to) const {
  auto bytes_of = [](const std::string& s) {
    json b = json::array();
    for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
    return b;
  };
  if (request_.endpoint == Endpoint::chat_completions) {
    json content = json::array();
    for (size_t i = from; i < to; ++i) {
      const auto& t = c.tokens[i];
      const std::string text = token_text(t.token);
      json top = json::array();
      for (const auto& alt : t.top) {
        const std::string at = token_text(alt.token);
        top.push_back({{"token", at}, {"logprob", alt.logprob}, {"bytes", bytes_of(at)}});
      }
      content.push_back(
          {{"token", text}, {"logprob", t.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < from; ++i) offset += token_text(c.tokens[i].token).size();
  for (size_t i = from; i < to; ++i) {
    const auto& t = c.tokens[i];
    const std::string text = token_text(t.token);
    tokens.push_back(text);
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& alt : t.top) top[token_text(alt.token)] = alt.logprob;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::string GenerationRun::tool_stream(size_t i, std::string fresh, json& calls_delta) {
  (void)fresh;  // already in c.text; what goes out is decided on the whole text
  Choice& c = choices_[i];
  if (c.finish == FinishReason::error) {
    // No complete reply to parse for calls, but the text held back is what the model wrote
    // before the error: it goes out as content, ahead of the error event.
    std::string out = c.text.substr(c.streamed);
    c.streamed = c.text.size();
    return out;
  }
  if (c.finish == FinishReason::none) {
    // Content up to where a call may begin; the rest waits for the finish.
    const size_t safe = grammar::tool_call_safe_prefix(request_.structured.format, c.text);
    if (safe <= c.streamed) return "";
    std::string out = c.text.substr(c.streamed, safe - c.streamed);
    c.streamed = safe;
    return out;
  }
  ToolCallReply reply = tool_call_reply(c.text, request_.structured, id_ + "_" + std::to_string(i));
  std::string out;
  if (reply.has_calls) {
    c.tool_calls = true;
    calls_delta = tool_call_deltas(reply.calls);
    // Content before the call that arrived with the finish (one update can carry many tokens).
    const size_t safe = grammar::tool_call_safe_prefix(request_.structured.format, c.text);
    if (safe > c.streamed) out = c.text.substr(c.streamed, safe - c.streamed);
  } else if (c.streamed < c.text.size()) {
    out = c.text.substr(c.streamed);
  }
  c.streamed = c.text.size();
  return out;
}

std::pair<int, std::string> GenerationRun::collect(const std::function<bool()>& alive) {
  if (!wait(alive)) return {499, ""};
  for (const auto& c : choices_) {
    if (c.finish == FinishReason::error) {
      const ApiError e = error_of(c);
      return {e.http_status, error_body(e)};
    }
  }
  const bool chat = request_.endpoint == Endpoint::chat_completions;
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json lp = request_.logprobs ? logprobs_json(c, 0, c.tokens.size()) : json(nullptr);
    if (chat) {
      json message = {{"role", "assistant"}, {"content", c.text}};
      if (request_.structured.parses_tool_calls()) {
        ToolCallReply reply = tool_call_reply(c.text, request_.structured, id_ + "_" + std::to_string(i));
        choices_[i].tool_calls = reply.has_calls;
        message = std::move(reply.message);
      }
      choices.push_back({{"index", i},
                         {"message", std::move(message)},
                         {"logprobs", lp},
                         {"finish_reason", finish_name(c)}});
    } else {
      const std::string text =
          request_.echo && request_.prompt_text ? *request_.prompt_text + c.text : c.text;
      choices.push_back({{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish_name(c)}});
      if (!tokenizer_) {
        json ids = json::array();
        for (const auto& t : c.tokens) ids.push_back(t.token);
        choices.back()["token_ids"] = ids;
      }
    }
  }
  json body = {{"id", id_},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", model_},
               {"system_fingerprint", "tandem"},
               {"choices", choices},
               {"usage", usage()},
               {"timings", timings()}};
  return {200, dump_json(body)};
}

bool GenerationRun::pump(const std::function<bool(const std::string&)>& write,
                         const std::function<bool()>& client_alive) {
  const bool chat = request_.endpoint == Endpoint::chat_completions;
  size_t events = 0;  // chunks written
  auto chunk = [&](json choice) {
    ++events;
    json j = {{"id", id_},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", model_},
              {"system_fingerprint", "tandem"},
              {"choices", json::array({std::move(choice)})}};
    return write("data: " + dump_json(j) + "\n\n");
  };
  auto alive = [&](bool ok) {
    if (!ok) cancel();
    return ok;
  };
  if (chat) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      if (!alive(chunk({{"index", i},
                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                        {"logprobs", nullptr},
                        {"finish_reason", nullptr}}))) {
        return false;
      }
    }
  }
  if (request_.echo && request_.prompt_text && !chat) {
    for (size_t i = 0; i < choices_.size(); ++i)
      if (!alive(chunk({{"index", i},
                        {"text", *request_.prompt_text},
                        {"logprobs", nullptr},
                        {"finish_reason", nullptr}})))
        return false;
  }
  for (;;) {
    bool all_done = true;
    const size_t events_before = events;
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      if (c.finish != FinishReason::none) continue;
      all_done = false;
      std::vector<size_t> fresh;
      std::string text = advance(i, std::chrono::milliseconds(choices_.size() > 1 ? 5 : 50), &fresh);
      json calls_delta;
      if (chat && request_.structured.parses_tool_calls())
        text = tool_stream(i, std::move(text), calls_delta);
      if (!text.empty() || (request_.logprobs && !fresh.empty())) {
        json lp = request_.logprobs && !fresh.empty() ? logprobs_json(c, fresh.front(), fresh.back() + 1)
                                                      : json(nullptr);
        json choice = chat ? json{{"index", i},
                                  {"delta", {{"content", text}}},
                                  {"logprobs", lp},
                                  {"finish_reason", nullptr}}
                           : json{{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", nullptr}};
        if (!alive(chunk(std::move(choice)))) return false;
      }
      if (!calls_delta.is_null()) {
        if (!alive(chunk({{"index", i},
                          {"delta", {{"tool_calls", std::move(calls_delta)}}},
                          {"logprobs", nullptr},
                          {"finish_reason", nullptr}})))
          return false;
      }
      if (c.finish == FinishReason::error) {
        // The text of the tokens before the error went out above; the error event replaces
        // the finish chunk (the status line said 200 long ago), then the stream ends as usual.
        if (!alive(write("data: " + error_body(error_of(c)) + "\n\n"))) return false;
        continue;
      }
      if (c.finish != FinishReason::none) {
        json choice =
            chat ? json{{"index", i},
                        {"delta", json::object()},
                        {"logprobs", nullptr},
                        {"finish_reason", finish_name(c)}}
                 : json{{"index", i}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", finish_name(c)}};
        if (!alive(chunk(std::move(choice)))) return false;
      }
    }
    if (all_done) break;
    // Nothing to send this pass (queued, prefilling): a client that left would
    // otherwise hold its request, and this HTTP worker, until its first token.
    if (events == events_before && client_alive && !client_alive()) {
      cancel();
      return false;
    }
  }
  if (request_.include_usage) {
    json j = {{"id", id_},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", model_},
              {"system_fingerprint", "tandem"},
              {"choices", json::array()},
              {"usage", usage()},
              {"timings", timings()}};
    if (!alive(write("data: " + dump_json(j) + "\n\n"))) return false;
  }
  return alive(write("data: [DONE]\n\n"));
}

}  // namespace tandem::server
