// RequestDefaults: what a generation request gets for a sampling field or
// max_tokens it omits (vLLM's behaviour for generation_config.json, plus
// llama-server's server-wide sampling flags).
//
// Precedence, field by field: the request, then the server's flags (--temp,
// --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty,
// --frequency-penalty, -n, --seed), then the model's generation_config.json
// (temperature, top_k, top_p, min_p, repetition_penalty, max_new_tokens),
// then tandem's built-in defaults (OpenAI's: temperature 1, no top-k, top-p,
// min-p or penalties; max_tokens up to the context; a random seed). A
// max_tokens default never exceeds the room the prompt leaves in the context
// (the request gets the smaller), while an explicit max_tokens that does not
// fit is a 400. `do_sample` is not applied (vLLM does not either).
// Plain values; pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "grammar/grammar.h"
#include "runtime/text_side.h"
#include "sampling/params.h"

namespace tandem::server {

// The server's own defaults, as the flags gave them (unset: not given).
struct ServerSamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  std::optional<int32_t> top_k;
  // -n: a number >= 1; kUnlimitedTokens (-1): up to the context, even when generation_config.json caps it.
  std::optional<int64_t> max_tokens;
  // --seed: the seed of every request that gives none; kRandomSeed (-1): a random one each (the built-in).
  std::optional<int64_t> seed;
};

inline constexpr int64_t kUnlimitedTokens = -1;
inline constexpr int64_t kRandomSeed = -1;

struct RequestDefaults {
  sampling::SamplingParams sampling;  // the base a request's own fields override
  std::optional<int64_t> max_tokens;  // none: up to the context
  std::optional<uint64_t> seed;       // none: a random seed per request
  // "temperature=0.6 (generation_config.json) top_k=20 (--top-k) ... max_tokens=up to the context
  // (built-in)".
  std::string description;
  // --chat-template-kwargs: extra globals every chat template render sees (e.g. enable_thinking).
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // --grammar / --grammar-file / -j / -jf: the grammar of a request without its own constraint
  // (apply_server_grammar, structured_request.h); null: none.
  std::shared_ptr<const grammar::Grammar> grammar;
  // Its GBNF text (a JSON Schema's, converted); "" when none. GET /props reports it as
  // llama-server does (default_generation_settings.params.grammar).
  std::string grammar_gbnf;
};

// The flags' values out of range: a message naming the flag, or nullopt.
std::optional<std::string> check_server_sampling_flags(const ServerSamplingFlags& flags);

// The defaults of the precedence rule above. A generation_config.json value
// the API's ranges reject (e.g. temperature 3) is left out with a WARN.
RequestDefaults resolve_request_defaults(const ServerSamplingFlags& flags,
                                         const runtime::GenerationDefaults& model);

}  // namespace tandem::server
