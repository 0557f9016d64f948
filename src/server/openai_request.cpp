#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

#include "server/request_fields.h"

namespace tandem::server {
namespace {

using nlohmann::json;

using fields::boolean;
using fields::fail;
using fields::integer;
using fields::number;
using fields::to_float;
using fields::type_name;

const json* field(const json& body, const char* name) { return fields::find(body, name); }

}  // namespace

void parse_stop_field(const json& body, GenerationRequest& r) {
  const json* v = field(body, "stop");
  if (!v) return;
  if (v->is_string()) {
    if (!v->get<std::string>().empty()) r.stop.push_back(v->get<std::string>());
    return;
  }
  if (!v->is_array()) fail("stop", "'stop' must be a string or an array of strings");
  if (v->size() > kMaxStopSequences)
    fail("stop", "'stop' accepts at most " + std::to_string(kMaxStopSequences) + " sequences");
  for (const auto& s : *v) {
    if (!s.is_string()) fail("stop", "'stop' must contain only strings");
    if (!s.get<std::string>().empty()) r.stop.push_back(s.get<std::string>());
  }
}

namespace {

// A logit_bias key as OpenAI's API takes it: a token id written in canonical decimal ("0", "42"),
// at most int32's maximum. Anything else (" 1", "+1", "01", "1 ", "1e3") is not a token id:
// std::stoll read " 1" and "+1" as 1, so two spellings could bias one token twice.
std::optional<int32_t> token_id_key(std::string_view key) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return std::nullopt;
  int64_t id = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + (c - '0');
  }
  if (id > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return static_cast<int32_t>(id);
}

void parse_logit_bias(const json& body, GenerationRequest& r) {
  const json* v = field(body, "logit_bias");
  if (!v) return;
  if (!v->is_object())
    fail("logit_bias", "'logit_bias' must be an object mapping token ids to numbers (or false)");
  for (const auto& [key, value] : v->items()) {
    constexpr size_t kQuoted = 40;  // of a long key, the message quotes the start
    const std::string shown = key.size() > kQuoted ? key.substr(0, kQuoted) + "..." : key;
    const auto id = token_id_key(key);
    if (!id)
      fail("logit_bias", "'logit_bias' key '" + shown +
                             "' is not a token id (a non-negative integer in decimal, such as \"42\")");
    r.sampling.logit_bias.emplace_back(*id,
                                       parse_logit_bias_value(value, "'logit_bias' value for token " + key));
  }
}

}  // namespace

float parse_logit_bias_value(const json& value, const std::string& entry) {
  if (value.is_boolean() && !value.get<bool>()) return sampling::kNeverProduced;
  // Finite as a float too: 1e39 would become infinity, and -1e39 a ban nobody asked for.
  if (!value.is_number() || !std::isfinite(to_float(value.get<double>()))) {
    const std::string got = value.is_primitive() ? value.dump() : std::string(type_name(value));
    fail(
        "logit_bias",
        entry + " must be a number between -100 and 100, or false (the token is never produced), got " + got);
  }
  return to_float(value.get<double>());
}

void parse_prompt_field(const json& body, GenerationRequest& r) {
  const json* v = field(body, "prompt");
  if (!v) fail("prompt", "'prompt' is required");
  if (v->is_string()) {
    r.prompt_text = v->get<std::string>();
    return;
  }
  if (v->is_array()) {
    if (v->size() == 1 && (*v)[0].is_string()) {
      r.prompt_text = (*v)[0].get<std::string>();
      return;
    }
    for (const auto& t : *v) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() > std::numeric_limits<int32_t>::max())
        fail("prompt", "'prompt' must be a string, a one-string array, or an array of token ids");
      r.prompt_tokens.push_back(t.get<int32_t>());
    }
    if (r.prompt_tokens.empty()) fail("prompt", "'prompt' must not be an empty array");
    return;
  }
  fail("prompt", std::string("'prompt' must be a string or an array of token ids, got ") + type_name(*v));
}

void check_messages_field(const json& body) {
  const json* v = field(body, "messages");
  if (!v) fail("messages", "'messages' is required");
  if (!v->is_array() || v->empty()) fail("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) fail(where, "'" + where + "' must be an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) fail(where + ".role", "'" + where + ".role' must be a string");
    const json* content = field(m, "content");
    if (content && !content->is_string() && !content->is_array())
      fail(where + ".content", "'" + where + ".content' must be a string or an array of content parts");
    if (content && content->is_array()) {
      for (const auto& part : *content) {
        const json* type = part.is_object() ? field(part, "type") : nullptr;
        if (!type || *type != "text" || !part.contains("text") || !part["text"].is_string())
          fail(where + ".content",
               "'" + where + ".content' supports only {\"type\": \"text\", \"text\": ...} parts");
      }
    }
  }
  if (const json* tools = field(body, "tools"); tools && !tools->is_array())
    fail("tools", "'tools' must be an array");
}

void parse_messages_field(const json& body, GenerationRequest& r) {
  check_messages_field(body);
  r.messages = *field(body, "messages");
  if (const json* tools = field(body, "tools")) r.tools = *tools;
}

// Types only: the ranges are sampling's (sampling::check_ranges, in parse_fields).
void parse_sampling_fields(const json& body, GenerationRequest& r) {
  constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  auto& s = r.sampling;
  if (auto t = number(body, "temperature")) s.temperature = to_float(*t);
  if (auto p = number(body, "top_p")) s.top_p = to_float(*p);
  if (auto k = integer(body, "top_k", kInt32Min, kInt32Max))
    s.top_k = *k == -1 ? 0 : static_cast<int32_t>(*k);  // -1 also disables it (vLLM's spelling)
  if (auto m = number(body, "min_p")) s.min_p = to_float(*m);
  if (auto p = number(body, "presence_penalty")) s.presence_penalty = to_float(*p);
  if (auto f = number(body, "frequency_penalty")) s.frequency_penalty = to_float(*f);
  if (auto rp = number(body, "repetition_penalty")) s.repetition_penalty = to_float(*rp);
  if (auto seed =
          integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    r.seed = static_cast<uint64_t>(*seed);
  }
  parse_logit_bias(body, r);
}

namespace {

void parse_logprobs(Endpoint endpoint, const json& body, GenerationRequest& r) {
  if (endpoint == Endpoint::chat_completions) {
    r.logprobs = boolean(body, "logprobs").value_or(false);
    if (auto n = integer(body, "top_logprobs", std::numeric_limits<int32_t>::min(),
                         std::numeric_limits<int32_t>::max())) {
      if (!r.logprobs && *n > 0) fail("top_logprobs", "'top_logprobs' requires 'logprobs': true");
      r.sampling.top_logprobs = static_cast<int32_t>(*n);
    }
    return;
  }
  // Legacy completions: logprobs is the number of alternatives (0..5).
  if (auto n = integer(body, "logprobs", 0, 5)) {
    r.logprobs = true;
    r.sampling.top_logprobs = static_cast<int32_t>(*n);
  }
  r.echo = boolean(body, "echo").value_or(false);
}

GenerationRequest parse_fields(Endpoint endpoint, const json& body,
                               const sampling::SamplingParams& defaults) {
  GenerationRequest r;
  r.endpoint = endpoint;
  r.sampling = defaults;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) fail("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (endpoint == Endpoint::completions) {
    parse_prompt_field(body, r);
  } else {
    check_messages_field(body);  // copied from the ordered parse (parse_generation_request)
  }
  auto max_tokens = integer(body, "max_tokens", 1, std::numeric_limits<int32_t>::max());
  auto max_completion = integer(body, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max());
  if (max_completion) max_tokens = max_completion;
  if (max_tokens) r.max_tokens = static_cast<int32_t>(*max_tokens);
  if (auto n = integer(body, "n", 1, kMaxChoices)) r.n = static_cast<int32_t>(*n);
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) fail("stream_options", "'stream_options' must be an object");
    if (auto u = boolean(*so, "include_usage")) r.include_usage = *u;
  }
  if (boolean(body, "ignore_eos").value_or(false)) r.ignore_eos = GenerationRequest::IgnoreEos::keep_going;
  parse_stop_field(body, r);
  parse_sampling_fields(body, r);
  parse_logprobs(endpoint, body, r);
  if (auto e = sampling::check_ranges(r.sampling)) fail(e->field, e->message);
  return r;
}

}  // namespace

ParseResult parse_generation_request(Endpoint endpoint, const std::string& body,
                                     const sampling::SamplingParams& defaults) {
  auto parsed = fields::parse_json_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  json& object = std::get<json>(parsed);
  return fields::catch_field_errors<GenerationRequest>([&] {
    GenerationRequest r = parse_fields(endpoint, object, defaults);
    const bool chat = endpoint == Endpoint::chat_completions;
    bool structured = chat;
    for (const char* key :
         {"response_format", "json_schema", "grammar", "tools", "tool_choice", "parallel_tool_calls"})
      structured = structured || object.contains(key);
    object = json();  // freed before the second parse: a large body's trees are not held together
    // Again with key order kept: a schema's properties are generated in its
    // order, and templates print tools and tool-call arguments as sent; a chat
    // request's messages come from this parse (r.messages stays null).
    if (structured) {
      if (auto e = parse_structured(nlohmann::ordered_json::parse(body), chat, r.structured))
        throw fields::FieldError{*e};
    }
    return r;
  });
}

}  // namespace tandem::server
