#include "runtime/chat_templates.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/mapped_file.h"

namespace tandem::runtime {
namespace {

// The two formats a llama-server user names most often, written from their
// published turn layouts (ChatML; Llama 3's header/eot tokens).
const char* const kChatml =
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}";
const char* const kLlama3 =
    "{{ bos_token }}"
    "{%- for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] + "
    "'<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

bool exists(const std::string& path) { return std::ifstream(path).good(); }

// Does tokenizer_config.json list a template named `name`?
bool has_named_template(const std::string& cfg_path, const std::string& name) {
  auto text = read_text_file(cfg_path);
  if (!text.ok()) return false;
  try {
    const auto cfg = nlohmann::json::parse(*text);
    if (!cfg.is_object() || !cfg.contains("chat_template") || !cfg["chat_template"].is_array()) return false;
    for (const auto& e : cfg["chat_template"])
      if (e.is_object() && e.value("name", "") == name) return true;
  } catch (const nlohmann::json::exception&) {
  }
  return false;
}

// `source` with the special tokens of tokenizer_config.json when there is one.
Expected<tok::ChatTemplate> with_tokens(const std::string& cfg_path, const std::string& source) {
  if (exists(cfg_path)) return tok::ChatTemplate::from_tokenizer_config(cfg_path, "", source);
  return tok::ChatTemplate::parse(source);
}

}  // namespace

std::vector<std::string> builtin_chat_template_names() { return {"chatml", "llama3"}; }

std::optional<std::string> builtin_chat_template(const std::string& name) {
  if (name == "chatml") return std::string(kChatml);
  if (name == "llama3") return std::string(kLlama3);
  return std::nullopt;
}

Expected<std::optional<tok::ChatTemplate>> load_chat_template(const std::string& dir,
                                                              const ChatTemplateChoice& choice) {
  const std::string cfg_path = dir + "/tokenizer_config.json";
  if (!choice.empty()) {
    Expected<tok::ChatTemplate> t = invalid_argument("");
    if (!choice.source.empty()) {
      t = with_tokens(cfg_path, choice.source);
    } else if (has_named_template(cfg_path, choice.name)) {
      t = tok::ChatTemplate::from_tokenizer_config(cfg_path, choice.name);
    } else if (auto builtin = builtin_chat_template(choice.name)) {
      t = with_tokens(cfg_path, *builtin);
    } else {
      std::string names;
      for (const auto& n : builtin_chat_template_names()) names += (names.empty() ? "" : ", ") + n;
      return invalid_argument(choice.flag + ": not a template of " + cfg_path + " nor a built-in one (" +
                              names + "); pass a Jinja template's text, or a file with --chat-template-file");
    }
    if (!t.ok()) return invalid_argument(choice.flag + ": " + t.status().message());
    spdlog::info("chat template from {}", choice.flag);
    return std::optional<tok::ChatTemplate>(std::move(*t));
  }
  const std::string jinja_path = dir + "/chat_template.jinja";
  if (exists(jinja_path)) {
    auto text = read_text_file(jinja_path);
    if (!text.ok()) return text.status();
    auto t = with_tokens(cfg_path, *text);
    if (t.ok()) return std::optional<tok::ChatTemplate>(std::move(*t));
    spdlog::warn("unusable chat template {}: {}", jinja_path, t.status().message());
    return std::optional<tok::ChatTemplate>();
  }
  if (!exists(cfg_path)) return std::optional<tok::ChatTemplate>();
  auto t = tok::ChatTemplate::from_tokenizer_config(cfg_path);
  if (t.ok()) return std::optional<tok::ChatTemplate>(std::move(*t));
  spdlog::warn("no usable chat template in {}: {}", cfg_path, t.status().message());
  return std::optional<tok::ChatTemplate>();
}

}  // namespace tandem::runtime
