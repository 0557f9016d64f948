#include "runtime/text_side.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/mapped_file.h"

namespace tandem::runtime {

using nlohmann::json;

std::vector<int32_t> generation_eos_ids(const std::string& dir) {
  std::vector<int32_t> out;
  const std::string path = dir + "/generation_config.json";
  auto text = read_text_file(path);
  if (!text.ok()) return out;
  try {
    json j = json::parse(*text);
    if (!j.is_object() || !j.contains("eos_token_id")) return out;
    const json& value = j["eos_token_id"];
    if (value.is_number_integer()) out.push_back(value.get<int32_t>());
    if (value.is_array())
      for (const auto& v : value)
        if (v.is_number_integer()) out.push_back(v.get<int32_t>());
  } catch (const json::exception&) {
    spdlog::warn("{}: not valid JSON; ignoring its eos_token_id", path);
  }
  return out;
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

Expected<TextSide> load_text_side(const std::string& dir, const model::ModelConfig& config) {
  TextSide text;
  const std::string tok_path = dir + "/tokenizer.json";
  if (std::ifstream(tok_path).good()) {
    TANDEM_ASSIGN_OR_RETURN(tok::Tokenizer t, tok::Tokenizer::from_file(tok_path));
    text.tokenizer = std::move(t);
  } else {
    spdlog::warn("{} not found: text prompts and chat need a tokenizer; only token-id prompts will work",
                 tok_path);
  }
  const std::string cfg_path = dir + "/tokenizer_config.json";
  if (std::ifstream(cfg_path).good()) {
    auto tpl = tok::ChatTemplate::from_tokenizer_config(cfg_path);
    if (tpl.ok()) {
      text.chat_template = std::move(*tpl);
    } else {
      spdlog::warn("no usable chat template in {}: {}", cfg_path, tpl.status().message());
    }
  }
  text.stop_tokens = stop_tokens(config, generation_eos_ids(dir), text.tokenizer, text.chat_template);
  return text;
}

}  // namespace tandem::runtime
