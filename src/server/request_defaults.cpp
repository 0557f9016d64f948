#include "server/request_defaults.h"

#include <fmt/format.h>

#include "core/log.h"

namespace tandem::server {
namespace {

// One sampling field: its flag, its generation_config.json key and its SamplingParams member.
template <typename T>
struct Field {
  const char* api_name;  // as the request spells it (and check_ranges reports it)
  const char* flag;
  const char* model_key;  // generation_config.json's name, or nullptr
  std::optional<T> ServerSamplingFlags::*from_flags;
  T sampling::SamplingParams::*member;
};

const Field<float> kFloatFields[] = {
    {"temperature", "--temp", "temperature", &ServerSamplingFlags::temperature,
     &sampling::SamplingParams::temperature},
    {"top_p", "--top-p", "top_p", &ServerSamplingFlags::top_p, &sampling::SamplingParams::top_p},
    {"min_p", "--min-p", "min_p", &ServerSamplingFlags::min_p, &sampling::SamplingParams::min_p},
    {"repetition_penalty", "--repeat-penalty", "repetition_penalty", &ServerSamplingFlags::repetition_penalty,
     &sampling::SamplingParams::repetition_penalty},
    {"presence_penalty", "--presence-penalty", nullptr, &ServerSamplingFlags::presence_penalty,
     &sampling::SamplingParams::presence_penalty},
    {"frequency_penalty", "--frequency-penalty", nullptr, &ServerSamplingFlags::frequency_penalty,
     &sampling::SamplingParams::frequency_penalty},
};

std::optional<float> model_value(const runtime::GenerationDefaults& g, const std::string& key) {
  if (key == "temperature") return g.temperature;
  if (key == "top_p") return g.top_p;
  if (key == "min_p") return g.min_p;
  if (key == "repetition_penalty") return g.repetition_penalty;
  return std::nullopt;
}

// The field alone in otherwise default params: does the API accept it?
template <typename T>
std::optional<sampling::ParamError> check_one(T sampling::SamplingParams::*member, T value) {
  sampling::SamplingParams p;
  p.*member = value;
  return sampling::check_ranges(p);
}

void describe(std::string& out, const std::string& name, const std::string& value,
              const std::string& source) {
  if (!out.empty()) out += ' ';
  out += name + "=" + value + " (" + source + ")";
}

}  // namespace

std::optional<std::string> check_server_sampling_flags(const ServerSamplingFlags& flags) {
  for (const auto& f : kFloatFields)
    if (const auto& v = flags.*(f.from_flags))
      if (auto e = check_one(f.member, *v))
        return std::string(f.flag) + " " + fmt::format("{}", *v) + ": " + e->message;
  if (flags.top_k && *flags.top_k < 0)
    return "--top-k " + std::to_string(*flags.top_k) + ": must be >= 0 (0: disabled)";
  if (flags.max_tokens && *flags.max_tokens != kUnlimitedTokens && *flags.max_tokens < 1)
    return "-n/--n-predict " + std::to_string(*flags.max_tokens) +
           ": must be >= 1, or -1 (up to the context)";
  if (flags.seed && *flags.seed < kRandomSeed)
    return "--seed " + std::to_string(*flags.seed) + ": must be >= 0, or -1 (a random seed per request)";
  return std::nullopt;
}

RequestDefaults resolve_request_defaults(const ServerSamplingFlags& flags,
                                         const runtime::GenerationDefaults& model) {
  RequestDefaults d;
  const std::string model_file = "generation_config.json";
  for (const auto& f : kFloatFields) {
    std::string source = "built-in";
    if (const auto& v = flags.*(f.from_flags)) {
      d.sampling.*(f.member) = *v;
      source = f.flag;
    } else if (auto v = f.model_key ? model_value(model, f.model_key) : std::nullopt) {
      if (auto e = check_one(f.member, *v)) {
        spdlog::warn("{}: {} = {} is outside the API's range ({}); not applied", model_file, f.model_key, *v,
                     e->message);
      } else {
        d.sampling.*(f.member) = *v;
        source = model_file;
      }
    }
    describe(d.description, f.api_name, fmt::format("{}", d.sampling.*(f.member)), source);
  }
  std::string source = "built-in";
  if (flags.top_k) {
    d.sampling.top_k = *flags.top_k;
    source = "--top-k";
  } else if (model.top_k) {
    d.sampling.top_k = *model.top_k;
    source = model_file;
  }
  describe(d.description, "top_k", std::to_string(d.sampling.top_k), source);

  if (flags.max_tokens) {
    if (*flags.max_tokens != kUnlimitedTokens) d.max_tokens = *flags.max_tokens;
    source = "-n";
  } else if (model.max_new_tokens) {
    d.max_tokens = *model.max_new_tokens;
    source = model_file + " max_new_tokens";
  } else {
    source = "built-in";
  }
  describe(d.description, "max_tokens", d.max_tokens ? std::to_string(*d.max_tokens) : "up to the context",
           source);

  if (flags.seed && *flags.seed != kRandomSeed) d.seed = static_cast<uint64_t>(*flags.seed);
  describe(d.description, "seed", d.seed ? std::to_string(*d.seed) : "random per request",
           flags.seed ? "--seed" : "built-in");
  return d;
}

}  // namespace tandem::server
