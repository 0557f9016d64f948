// ChatTemplate: a Hugging Face chat template (Jinja) parsed once and rendered
// per request, reproducing transformers' apply_chat_template(tokenize=False):
// trim_blocks + lstrip_blocks, globals messages/tools/add_generation_prompt/
// bos_token/eos_token, helpers raise_exception() and strftime_now().
//
// Templates that use a Jinja construct tandem does not implement fail at
// parse() or render() with a Status naming the construct and template line;
// raise_exception("...") in a template becomes an InvalidArgument Status with
// that message. Immutable after parse; render() is thread-safe.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"

namespace tandem::tok {

namespace jinja {
struct Template;
}

struct ChatRenderInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: `tools` is undefined in the template
  bool add_generation_prompt = false;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more globals (e.g. enable_thinking)
  std::optional<std::tm> now;  // strftime_now()'s clock; local time when absent
};

class ChatTemplate {
 public:
  static Expected<ChatTemplate> parse(const std::string& source, std::string bos_token = "",
                                      std::string eos_token = "");
  // Reads "chat_template" (a string, or a list of {name, template}: `name`
  // or "default" is chosen) and the special tokens from tokenizer_config.json;
  // like transformers, every "*_token" (bos, eos, unk, pad, ...) and
  // additional_special_tokens become template variables; a token that is
  // absent or null stays undefined in the template, as in transformers.
  // `source`, when given, replaces the file's chat_template (which may then
  // be absent): the file still supplies the special tokens (chat_template.jinja,
  // --chat-template).
  static Expected<ChatTemplate> from_tokenizer_config(
      const std::string& path, const std::string& name = "",
      const std::optional<std::string>& source = std::nullopt);

  Expected<std::string> render(const ChatRenderInput& input) const;

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

 private:
  std::shared_ptr<const jinja::Template> tpl_;
  std::string source_, bos_, eos_;
  bool bos_defined_ = true, eos_defined_ = true;  // false: absent/null in tokenizer_config.json
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();  // name -> string or list
};

}  // namespace tandem::tok
