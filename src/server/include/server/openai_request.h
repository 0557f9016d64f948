// Parsing and validation of POST /v1/completions and /v1/chat/completions
// bodies into a GenerationRequest. Every malformed, wrongly typed or
// out-of-range field becomes a 400 ApiError naming the field. No model or
// tokenizer knowledge here: prompt length and vocabulary checks happen once
// the prompt is tokenized. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sampling/params.h"
#include "server/api_error.h"
#include "server/structured_request.h"

namespace tandem::server {

enum class Endpoint { completions, chat_completions };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;  // may be empty: the served model
  // completions: exactly one of prompt_text / prompt_tokens is set.
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_tokens;
  // chat: the messages (and tools), validated for shape, rendered later by the chat template.
  // parse_generation_request leaves these null and fills structured.messages / .tools (key
  // order kept) instead; the llama-server and Ollama parsers fill these.
  nlohmann::json messages;
  nlohmann::json tools;
  std::optional<int32_t> max_tokens;  // max_tokens / max_completion_tokens
  std::vector<std::string> stop;
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // chat: logprobs=true; completions: logprobs=N
  bool echo = false;           // completions only
  // ignore_eos: the model's end-of-generation tokens do not end the request. keep_going (the
  // OpenAI routes, vLLM's extension): they are sampled like any token and the request runs to
  // max_tokens or a stop string; ban (/completion, llama-server's): they are never sampled.
  enum class IgnoreEos { off, keep_going, ban };
  IgnoreEos ignore_eos = IgnoreEos::off;
  std::optional<uint64_t> seed;  // empty: the service picks a random one
  sampling::SamplingParams sampling;
  // llama-server's [["text", bias], ...] logit_bias entries: the bias goes to every token of the
  // text tokenized without special tokens, added to sampling.logit_bias by Service::start_request
  // once the tokenizer is known. `entry` names it in errors: "'logit_bias[2]'".
  struct TextBias {
    std::string text;
    float bias = 0.0f;
    std::string entry;
  };
  std::vector<TextBias> text_logit_bias;
  // response_format / json_schema / grammar / tools / tool_choice (structured_request.h).
  StructuredRequest structured;
};

inline constexpr int32_t kMaxChoices = 16;
inline constexpr size_t kMaxStopSequences = 8;

using ParseResult = std::variant<GenerationRequest, ApiError>;

// Parses a body (raw bytes). Malformed JSON → 400 with the parser's position.
// `defaults`: the sampling fields a request that omits them gets
// (server/request_defaults.h); the request's own fields override them.
ParseResult parse_generation_request(Endpoint endpoint, const std::string& body,
                                     const sampling::SamplingParams& defaults = {});

// The field readers parse_generation_request uses, for the llama-server and
// Ollama bodies that share OpenAI's spelling of these fields. Types only (the
// ranges are sampling::check_ranges'); they throw fields::FieldError
// (server/request_fields.h), which the calling parser catches.
// prompt: a string, a one-string array or an array of token ids (required).
void parse_prompt_field(const nlohmann::json& body, GenerationRequest& r);
// messages (required) and tools.
void parse_messages_field(const nlohmann::json& body, GenerationRequest& r);
// The checks of parse_messages_field without the copy (the chat parser takes its messages from
// the key-order-keeping parse: a copy here would be one more tree of a large body).
void check_messages_field(const nlohmann::json& body);
// stop: a string or an array of at most kMaxStopSequences strings.
void parse_stop_field(const nlohmann::json& body, GenerationRequest& r);
// temperature, top_p, top_k, min_p, presence/frequency/repetition_penalty, seed, logit_bias.
void parse_sampling_fields(const nlohmann::json& body, GenerationRequest& r);
// A logit_bias value: a finite number, or false (llama-server's spelling of "never produce this
// token": a bias of -infinity). Anything else (true, a string, a number beyond float's range)
// throws a 400 naming logit_bias, its message opening with `entry` ("'logit_bias[2]' bias").
float parse_logit_bias_value(const nlohmann::json& value, const std::string& entry);

}  // namespace tandem::server
