#include "runtime/text_side.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/log.h"
#include "core/mapped_file.h"

namespace tandem::runtime {

using nlohmann::json;

namespace {

// DIR/generation_config.json parsed; none when absent, or not JSON (a WARN: `ignoring`).
std::optional<json> read_generation_config(const std::string& dir, const char* ignoring) {
  const std::string path = dir + "/generation_config.json";
  auto text = read_text_file(path);
  if (!text.ok()) return std::nullopt;
  try {
    return json::parse(*text);
  } catch (const json::exception&) {
    spdlog::warn("{}: not valid JSON; ignoring {}", path, ignoring);
  }
  return std::nullopt;
}

std::vector<int32_t> eos_ids_of(const json& j) {
  std::vector<int32_t> out;
  if (!j.is_object() || !j.contains("eos_token_id")) return out;
  const json& value = j["eos_token_id"];
  if (value.is_number_integer()) out.push_back(value.get<int32_t>());
  if (value.is_array())
    for (const auto& v : value)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  return out;
}

}  // namespace

std::vector<int32_t> generation_eos_ids(const std::string& dir) {
  auto j = read_generation_config(dir, "its eos_token_id");
  return j ? eos_ids_of(*j) : std::vector<int32_t>{};
}

namespace {

// The field's number if it is one, finite and `ok`; else unset (a WARN unless absent or null).
template <typename T, typename Ok>
std::optional<T> number_field(const json& j, const char* name, const char* range, const std::string& source,
                              Ok ok) {
  if (!j.contains(name) || j[name].is_null()) return std::nullopt;
  const json& v = j[name];
  const bool integral = std::is_integral_v<T>;
  if (v.is_number() && !v.is_boolean() && (!integral || v.is_number_integer())) {
    const double d = v.get<double>();
    if (std::isfinite(d) && ok(d)) return static_cast<T>(integral ? v.get<int64_t>() : d);
  }
  spdlog::warn("{}: {} = {} is not {}; ignoring it", source, name, v.dump(), range);
  return std::nullopt;
}

}  // namespace

bool GenerationDefaults::empty() const {
  return !temperature && !top_p && !top_k && !min_p && !repetition_penalty && !max_new_tokens && !do_sample;
}

std::string GenerationDefaults::describe() const {
  std::string out;
  auto add = [&out](const char* name, const std::string& value) {
    if (!out.empty()) out += ' ';
    out += std::string(name) + "=" + value;
  };
  auto num = [](float f) { return fmt::format("{}", f); };
  if (temperature) add("temperature", num(*temperature));
  if (top_p) add("top_p", num(*top_p));
  if (top_k) add("top_k", std::to_string(*top_k));
  if (min_p) add("min_p", num(*min_p));
  if (repetition_penalty) add("repetition_penalty", num(*repetition_penalty));
  if (max_new_tokens) add("max_new_tokens", std::to_string(*max_new_tokens));
  if (do_sample) add("do_sample", *do_sample ? "true" : "false");
  return out.empty() ? "none" : out;
}

GenerationDefaults parse_generation_defaults(const json& j, const std::string& source) {
  GenerationDefaults g;
  if (!j.is_object()) {
    spdlog::warn("{}: not a JSON object; ignoring its sampling defaults", source);
    return g;
  }
  g.temperature =
      number_field<float>(j, "temperature", "a number >= 0", source, [](double d) { return d >= 0; });
  g.top_p =
      number_field<float>(j, "top_p", "a number in (0, 1]", source, [](double d) { return d > 0 && d <= 1; });
  g.top_k = number_field<int32_t>(j, "top_k", "an integer in [0, 2^31)", source,
                                  [](double d) { return d >= 0 && d <= 2147483647.0; });
  g.min_p = number_field<float>(j, "min_p", "a number in [0, 1]", source,
                                [](double d) { return d >= 0 && d <= 1; });
  g.repetition_penalty =
      number_field<float>(j, "repetition_penalty", "a number > 0", source, [](double d) { return d > 0; });
  g.max_new_tokens = number_field<int64_t>(j, "max_new_tokens", "an integer >= 1", source,
                                           [](double d) { return d >= 1 && d <= 9.2e18; });
  if (j.contains("do_sample") && !j["do_sample"].is_null()) {
    if (j["do_sample"].is_boolean())
      g.do_sample = j["do_sample"].get<bool>();
    else
      spdlog::warn("{}: do_sample = {} is not a boolean; ignoring it", source, j["do_sample"].dump());
  }
  return g;
}

GenerationDefaults generation_defaults(const std::string& dir) {
  auto j = read_generation_config(dir, "its sampling defaults");
  return j ? parse_generation_defaults(*j, dir + "/generation_config.json") : GenerationDefaults{};
}

std::vector<int32_t> stop_tokens(const model::ModelConfig& config, const std::vector<int32_t>& generation_eos,
                                 const std::optional<tok::Tokenizer>& tokenizer,
                                 const std::optional<tok::ChatTemplate>& chat_template) {
  std::vector<int32_t> out = config.eos_token_ids;
  out.insert(out.end(), generation_eos.begin(), generation_eos.end());
  if (tokenizer && chat_template && !chat_template->eos_token().empty())
    if (auto id = tokenizer->token_to_id(chat_template->eos_token())) out.push_back(*id);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Expected<TextSide> load_text_side(const std::string& dir, const model::ModelConfig& config,
                                  const ChatTemplateChoice& chat_template) {
  TextSide text;
  const std::string tok_path = dir + "/tokenizer.json";
  if (std::ifstream(tok_path).good()) {
    TANDEM_ASSIGN_OR_RETURN(tok::Tokenizer t, tok::Tokenizer::from_file(tok_path));
    text.tokenizer = std::move(t);
  } else {
    spdlog::warn("{} not found: text prompts and chat need a tokenizer; only token-id prompts will work",
                 tok_path);
  }
  TANDEM_ASSIGN_OR_RETURN(text.chat_template, load_chat_template(dir, chat_template));
  // generation_config.json is read once, for its eos ids and its sampling defaults.
  auto generation = read_generation_config(dir, "its eos_token_id and sampling defaults");
  text.stop_tokens = stop_tokens(config, generation ? eos_ids_of(*generation) : std::vector<int32_t>{},
                                 text.tokenizer, text.chat_template);
  if (generation) text.generation = parse_generation_defaults(*generation, dir + "/generation_config.json");
  return text;
}

}  // namespace tandem::runtime
