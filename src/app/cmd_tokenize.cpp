// `tandem tokenize -m DIR|FILE.gguf [--file F] [TEXT]`: prints the token ids of TEXT
// (or of file F, or of stdin) on one line, space-separated; --pieces adds a
// second line with the token strings (JSON-quoted).
// `tandem tokenize -m DIR --chat MESSAGES.json [--add-generation-prompt]`:
// prints the chat template's rendering of the messages, byte for byte.
// `tandem tokenize -m DIR --decode "1 2 3" [--skip-special]`: prints the text.
// MESSAGES.json is a list of messages, or an object with "messages" and
// optionally "tools" and other template variables. Errors go to stderr, exit 1.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "commands.h"
#include "core/mapped_file.h"
#include "model/gguf_model.h"
#include "runtime/chat_templates.h"
#include "runtime/gguf_text_side.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::app {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string file;
  std::string chat;
  std::string decode;
  bool skip_special = false;
  bool pieces = false;
  bool no_special = false;
  bool add_generation_prompt = false;
};

std::string model_file(const std::string& model, const char* name) {
  if (model.size() >= 5 && model.substr(model.size() - 5) == ".json") {
    size_t slash = model.find_last_of('/');
    return (slash == std::string::npos ? std::string() : model.substr(0, slash + 1)) + name;
  }
  return model + "/" + name;
}

int fail(const Status& s) {
  std::fprintf(stderr, "tandem tokenize: %s\n", s.to_string().c_str());
  return 1;
}

// A GGUF file's tokenizer and chat template (runtime/gguf_text_side.h).
Expected<runtime::TextSide> gguf_text(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(model::GgufFile f, model::GgufFile::open(path));
  return runtime::load_gguf_text_side(f, model::ModelConfig{});
}

Expected<tok::ChatTemplate> load_template(const std::string& model) {
  if (!model::is_gguf_path(model))
    return tok::ChatTemplate::from_tokenizer_config(model_file(model, "tokenizer_config.json"));
  TANDEM_ASSIGN_OR_RETURN(runtime::TextSide text, gguf_text(model));
  if (!text.chat_template) return not_found(model + ": no usable tokenizer.chat_template");
  return std::move(*text.chat_template);
}

Expected<tok::Tokenizer> load_tokenizer(const std::string& model) {
  if (!model::is_gguf_path(model)) return tok::Tokenizer::from_file(model_file(model, "tokenizer.json"));
  TANDEM_ASSIGN_OR_RETURN(runtime::TextSide text, gguf_text(model));
  if (!text.tokenizer) return not_found(model + ": no tokenizer.ggml.model (no tokenizer in the file)");
  return std::move(*text.tokenizer);
}

int run_chat(const TokenizeOptions& o) {
  auto tpl = load_template(o.model);
  if (!tpl.ok()) return fail(tpl.status());
  auto text = read_text_file(o.chat);
  if (!text.ok()) return fail(text.status());
  tok::ChatRenderInput in;
  try {
    auto j = nlohmann::ordered_json::parse(*text);
    if (j.is_array()) {
      in.messages = j;
    } else if (j.is_object() && j.contains("messages")) {
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "messages")
          in.messages = it.value();
        else if (it.key() == "tools")
          in.tools = it.value();
        else if (it.key() == "add_generation_prompt")
          in.add_generation_prompt = it.value().get<bool>();
        else
          in.extra[it.key()] = it.value();
      }
    } else {
      return fail(invalid_argument(o.chat + ": expected a list of messages or an object with \"messages\""));
    }
  } catch (const nlohmann::json::exception& e) {
    return fail(invalid_argument(o.chat + ": " + e.what()));
  }
  if (o.add_generation_prompt) in.add_generation_prompt = true;
  auto out = tpl->render(in);
  if (!out.ok()) return fail(out.status());
  std::fwrite(out->data(), 1, out->size(), stdout);
  return 0;
}

int run_tokenize(const TokenizeOptions& o) {
  if (!o.chat.empty()) return run_chat(o);
  auto tokenizer = load_tokenizer(o.model);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  if (!o.decode.empty()) {
    std::vector<int32_t> ids;
    std::string item;
    for (char c : o.decode + " ") {
      if (c == ' ' || c == ',' || c == '\n' || c == '\t') {
        if (item.empty()) continue;
        char* end = nullptr;
        long v = std::strtol(item.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v > INT32_MAX)
          return fail(invalid_argument("--decode: \"" + item + "\" is not a token id"));
        ids.push_back(static_cast<int32_t>(v));
        item.clear();
      } else {
        item.push_back(c);
      }
    }
    std::string text = tokenizer->decode(ids, o.skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::string text = o.text;
  if (!o.file.empty()) {
    auto t = read_text_file(o.file);
    if (!t.ok()) return fail(t.status());
    text = *t;
  } else if (o.text.empty()) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  auto ids = tokenizer->encode(text, !o.no_special);
  std::string line;
  for (size_t k = 0; k < ids.size(); ++k) line += (k ? " " : "") + std::to_string(ids[k]);
  std::printf("%s\n", line.c_str());
  if (o.pieces) {
    std::string pieces;
    for (size_t k = 0; k < ids.size(); ++k)
      pieces += (k ? " " : "") + nlohmann::json(tokenizer->id_to_token(ids[k]).value_or("")).dump();
    std::printf("%s\n", pieces.c_str());
  }
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "Print token ids of a text, or render a chat template");
  sub->add_option("-m,--model", o->model,
                  "Model directory (tokenizer.json, tokenizer_config.json) or a GGUF file")
      ->required();
  sub->add_option("text", o->text, "Text to tokenize (default: --file or stdin)");
  sub->add_option("--file", o->file, "Tokenize the contents of this file");
  sub->add_flag("--pieces", o->pieces, "Also print the token strings");
  sub->add_flag("--no-special", o->no_special, "Do not add special tokens (BOS/EOS of the post-processor)");
  sub->add_option("--chat", o->chat, "Render the chat template for the messages in this JSON file");
  sub->add_flag("--add-generation-prompt", o->add_generation_prompt,
                "With --chat: end with the assistant prefix");
  sub->add_option("--decode", o->decode, "Print the text of these token ids (space or comma separated)");
  sub->add_flag("--skip-special", o->skip_special, "With --decode: leave out special tokens");
  return {sub, [o] { return run_tokenize(*o); }};
}

}  // namespace tandem::app
