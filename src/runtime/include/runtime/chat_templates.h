// Which chat template a model directory is served with, and the few built-in
// templates `--chat-template NAME` offers.
//
// load_chat_template(dir, choice) picks, in order:
//   1. choice.source (--chat-template TEMPLATE, --chat-template-file F);
//   2. choice.name: tokenizer_config.json's template of that name (its
//      chat_template is a list of {name, template}), else a built-in;
//   3. DIR/chat_template.jinja (transformers' newer layout; like
//      transformers, it wins over tokenizer_config.json's chat_template);
//   4. tokenizer_config.json's chat_template.
// The special tokens (bos_token, eos_token, ...) come from
// tokenizer_config.json whichever template is used. A template the user gave
// (1, 2) that cannot be found or parsed is an error naming choice.flag; the
// model's own (3, 4) that cannot be parsed is logged and leaves no template
// (chat is then refused), as before.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_template.h"

namespace tandem::runtime {

struct ChatTemplateChoice {
  std::string source;  // a template's text; wins over name
  std::string name;    // a named template of the model, or a built-in
  std::string flag;    // what gave it, for messages: "--chat-template-file x.jinja"
  bool empty() const { return source.empty() && name.empty(); }
};

// The built-in templates' names (chatml, llama3), and one's source (nullopt: no such built-in).
std::vector<std::string> builtin_chat_template_names();
std::optional<std::string> builtin_chat_template(const std::string& name);

// The chosen template; nullopt when the model has none (or an unusable one, logged).
Expected<std::optional<tok::ChatTemplate>> load_chat_template(const std::string& dir,
                                                              const ChatTemplateChoice& choice);

}  // namespace tandem::runtime
