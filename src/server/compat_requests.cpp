#include "server/compat_requests.h"

#include <limits>

#include "server/request_fields.h"
#include "server/structured_request.h"

namespace tandem::server {

using nlohmann::json;

namespace {

// llama-server's array form: [[token_id or "text", bias or false], ...]. Each entry adds its bias
// (a repeated token gets the sum, as in llama-server); a text's tokens are found later
// (GenerationRequest::text_logit_bias).
void parse_logit_bias_pairs(const json& pairs, GenerationRequest& r) {
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::string entry = "'logit_bias[" + std::to_string(i) + "]'";
    const json& pair = pairs[i];
    if (!pair.is_array() || pair.size() != 2)
      fields::fail("logit_bias", entry + " must be a pair [token_id or \"text\", bias or false]");
    const float bias = parse_logit_bias_value(pair[1], entry + " bias");
    const json& token = pair[0];
    if (token.is_string()) {
      if (token.get<std::string>().empty())
        fields::fail("logit_bias", entry + " text is empty: it names no token");
      r.text_logit_bias.push_back({token.get<std::string>(), bias, entry});
      continue;
    }
    // The id as written (2^64 - 1 stays that, not -1); the vocabulary's bound is checked with the model.
    if (!token.is_number_integer() || (!token.is_number_unsigned() && token.get<int64_t>() < 0) ||
        (token.is_number_unsigned() && token.get<uint64_t>() > std::numeric_limits<int32_t>::max()))
      fields::fail("logit_bias", entry + " token " + token.dump() +
                                     " is not a token id (a non-negative integer) or a text");
    r.sampling.logit_bias.emplace_back(static_cast<int32_t>(token.get<int64_t>()), bias);
  }
}

}  // namespace

std::variant<GenerationRequest, ApiError> parse_llama_completion(const std::string& body) {
  auto parsed = fields::parse_json_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  json b = std::get<json>(parsed);
  return fields::catch_field_errors<GenerationRequest>([&] {
    GenerationRequest r;
    r.endpoint = Endpoint::completions;
    // llama-server's spellings, mapped onto OpenAI's before the shared readers run.
    // -1: random. A signed -1 only: nlohmann compares the unsigned 2^64 - 1 equal to -1, and that
    // seed is out of range (a 400 naming 'seed', as on /v1/completions), not a request for a random one.
    if (const json* seed = fields::find(b, "seed");
        seed && seed->is_number_integer() && !seed->is_number_unsigned() && seed->get<int64_t>() == -1)
      b.erase("seed");
    if (const json* rp = fields::find(b, "repeat_penalty")) {
      if (!rp->is_number()) fields::fail("repeat_penalty", "'repeat_penalty' must be a number");
      b["repetition_penalty"] = *rp;
    }
    if (const json* lb = fields::find(b, "logit_bias"); lb && lb->is_array()) {
      parse_logit_bias_pairs(*lb, r);
      b.erase("logit_bias");  // read; the object form is parse_sampling_fields'
    }
    parse_prompt_field(b, r);
    if (auto n = fields::integer(b, "n_predict", -1, std::numeric_limits<int32_t>::max())) {
      if (*n == 0) fields::fail("n_predict", "'n_predict' must be -1 (up to the context) or at least 1");
      if (*n > 0) r.max_tokens = static_cast<int32_t>(*n);
    }
    r.stream = fields::boolean(b, "stream").value_or(false);
    fields::boolean(b, "cache_prompt");  // type-checked; prefix reuse is always on (and exact)
    if (fields::boolean(b, "ignore_eos").value_or(false)) r.ignore_eos = GenerationRequest::IgnoreEos::ban;
    // n_probs: the top-N alternatives of every generated token (completion_probabilities).
    if (auto n = fields::integer(b, "n_probs", 0, 20); n && *n > 0) {
      r.logprobs = true;
      r.sampling.top_logprobs = static_cast<int32_t>(*n);
    }
    parse_stop_field(b, r);
    parse_sampling_fields(b, r);
    if (auto e = sampling::check_ranges(r.sampling)) fields::fail(e->field, e->message);
    // llama-server's structured outputs (json_schema, grammar; response_format too), read as
    // /v1/completions reads them, with key order kept.
    if (b.contains("json_schema") || b.contains("grammar") || b.contains("response_format")) {
      if (auto e = parse_structured(nlohmann::ordered_json::parse(body), false, r.structured))
        throw fields::FieldError{*e};
    }
    return r;
  });
}

namespace {

// options {...}: Ollama's names for the sampling fields.
void parse_options(const json& body, GenerationRequest& r) {
  const json* o = fields::find(body, "options");
  if (!o) return;
  if (!o->is_object()) fields::fail("options", "'options' must be an object");
  json mapped = json::object();
  for (const char* same :
       {"temperature", "top_k", "top_p", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty"})
    if (o->contains(same)) mapped[same] = (*o)[same];
  if (o->contains("repeat_penalty")) mapped["repetition_penalty"] = (*o)["repeat_penalty"];
  // num_predict: -1 infinite, -2 fill the context (both: up to the context here).
  if (auto n = fields::integer(*o, "num_predict", -2, std::numeric_limits<int32_t>::max())) {
    if (*n == 0)
      fields::fail("num_predict", "'num_predict' must be at least 1 (or -1 / -2: up to the context)");
    if (*n > 0) r.max_tokens = static_cast<int32_t>(*n);
  }
  parse_stop_field(mapped, r);
  parse_sampling_fields(mapped, r);
}

}  // namespace

std::variant<OllamaRequest, ApiError> parse_ollama_request(OllamaEndpoint endpoint, const std::string& body) {
  auto parsed = fields::parse_json_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& b = std::get<json>(parsed);
  return fields::catch_field_errors<OllamaRequest>([&] {
    OllamaRequest o;
    GenerationRequest& r = o.generation;
    o.model = fields::string(b, "model").value_or("");
    r.model = o.model;
    r.stream = fields::boolean(b, "stream").value_or(true);
    // format: "json" or a JSON Schema, through the grammar engine response_format uses (key order kept).
    if (b.contains("format")) {
      const auto ordered = nlohmann::ordered_json::parse(body);
      if (auto e = parse_ollama_format(ordered["format"], r.structured)) throw fields::FieldError{*e};
    }
    if (const json* images = fields::find(b, "images"); images && !(images->is_array() && images->empty()))
      fields::fail("images", "'images' is not supported: the served model reads text only");
    parse_options(b, r);
    if (auto e = sampling::check_ranges(r.sampling)) fields::fail(e->field, e->message);
    if (endpoint == OllamaEndpoint::chat) {
      const json* messages = fields::find(b, "messages");
      if (!messages || (messages->is_array() && messages->empty())) {
        o.load_only = true;
        return o;
      }
      r.endpoint = Endpoint::chat_completions;
      parse_messages_field(b, r);
      for (size_t i = 0; i < r.messages.size(); ++i) {
        const json* images = fields::find(r.messages[i], "images");
        if (images && !(images->is_array() && images->empty()))
          fields::fail("messages[" + std::to_string(i) + "].images",
                       "'images' is not supported: the served model reads text only");
      }
      return o;
    }
    const std::string prompt = fields::string(b, "prompt").value_or("");
    const std::string system = fields::string(b, "system").value_or("");
    const bool raw = fields::boolean(b, "raw").value_or(false);
    fields::string(b, "suffix");  // type-checked; fill-in-the-middle is not supported
    if (prompt.empty()) {
      o.load_only = true;
      return o;
    }
    r.prompt_text = prompt;
    r.endpoint = Endpoint::completions;
    if (!raw) {
      // Templated as Ollama's model template would: [system], user prompt, assistant turn.
      r.endpoint = Endpoint::chat_completions;
      r.messages = json::array();
      if (!system.empty()) r.messages.push_back({{"role", "system"}, {"content", system}});
      r.messages.push_back({{"role", "user"}, {"content", prompt}});
    }
    return o;
  });
}

}  // namespace tandem::server
