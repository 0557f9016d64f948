#include "runtime/gguf_text_side.h"

#include <limits>

#include "core/log.h"

namespace tandem::runtime {
namespace {

Status read_id(const model::GgufFile& f, const char* key, int32_t& out) {
  if (f.find(key) == nullptr) return Status::Ok();
  TANDEM_ASSIGN_OR_RETURN(int64_t v, f.get_int(key));
  if (v < 0 || v > std::numeric_limits<int32_t>::max())
    return invalid_argument(f.path() + ": metadata \"" + key + "\" (" + std::to_string(v) +
                            ") is not a token id");
  out = static_cast<int32_t>(v);
  return Status::Ok();
}

Status read_flag(const model::GgufFile& f, const char* key, std::optional<bool>& out) {
  if (f.find(key) == nullptr) return Status::Ok();
  TANDEM_ASSIGN_OR_RETURN(bool v, f.get_bool(key));
  out = v;
  return Status::Ok();
}

// The template `choice` names (it wins over the file's, as in llama-server), else
// tokenizer.chat_template. bos/eos are the file's tokens either way.
Expected<std::optional<tok::ChatTemplate>> gguf_chat_template(const model::GgufFile& f,
                                                              const std::optional<tok::GgufVocab>& vocab,
                                                              const ChatTemplateChoice& choice) {
  auto token = [&](int32_t id) {
    return vocab && id >= 0 && static_cast<size_t>(id) < vocab->tokens.size()
               ? std::string(vocab->tokens[static_cast<size_t>(id)])
               : std::string();
  };
  const std::string bos = vocab ? token(vocab->bos_id) : "", eos = vocab ? token(vocab->eos_id) : "";
  if (!choice.empty()) {
    std::string source = choice.source;
    // A name: the file's tokenizer.chat_template.NAME (llama.cpp's named templates), else a built-in.
    const std::string key = "tokenizer.chat_template." + choice.name;
    if (source.empty() && f.find(key) != nullptr) {
      TANDEM_ASSIGN_OR_RETURN(source, f.get_string(key));
    } else if (source.empty()) {
      auto builtin = builtin_chat_template(choice.name);
      if (!builtin) {
        std::string names;
        for (const auto& n : builtin_chat_template_names()) names += (names.empty() ? "" : ", ") + n;
        return invalid_argument(choice.flag + ": not a template of " + f.path() + " (" + key +
                                ") nor a built-in one (" + names +
                                "); pass a Jinja template's text, or a file with --chat-template-file");
      }
      source = *builtin;
    }
    auto tpl = tok::ChatTemplate::parse(source, bos, eos);
    if (!tpl.ok()) return invalid_argument(choice.flag + ": " + tpl.status().message());
    spdlog::info("chat template from {} (instead of {}'s tokenizer.chat_template)", choice.flag, f.path());
    return std::optional<tok::ChatTemplate>(std::move(*tpl));
  }
  if (f.find("tokenizer.chat_template") == nullptr) return std::optional<tok::ChatTemplate>();
  TANDEM_ASSIGN_OR_RETURN(std::string source, f.get_string("tokenizer.chat_template"));
  auto tpl = tok::ChatTemplate::parse(source, bos, eos);
  if (tpl.ok()) return std::optional<tok::ChatTemplate>(std::move(*tpl));
  spdlog::warn("no usable chat template in {} (tokenizer.chat_template): {}", f.path(),
               tpl.status().message());
  return std::optional<tok::ChatTemplate>();
}

}  // namespace

Expected<std::optional<tok::GgufVocab>> gguf_vocab(const model::GgufFile& f) {
  if (f.find("tokenizer.ggml.model") == nullptr) return std::optional<tok::GgufVocab>();
  tok::GgufVocab v;
  TANDEM_ASSIGN_OR_RETURN(v.model, f.get_string("tokenizer.ggml.model"));
  if (f.find("tokenizer.ggml.pre") != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(v.pre, f.get_string("tokenizer.ggml.pre"));
  }
  TANDEM_ASSIGN_OR_RETURN(v.tokens, f.get_string_array("tokenizer.ggml.tokens"));
  if (f.find("tokenizer.ggml.scores") != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(v.scores, f.get_float_array("tokenizer.ggml.scores"));
  }
  if (f.find("tokenizer.ggml.token_type") != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(v.token_types, f.get_int32_array("tokenizer.ggml.token_type"));
  }
  if (f.find("tokenizer.ggml.merges") != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(v.merges, f.get_string_array("tokenizer.ggml.merges"));
  }
  TANDEM_RETURN_IF_ERROR(read_id(f, "tokenizer.ggml.bos_token_id", v.bos_id));
  TANDEM_RETURN_IF_ERROR(read_id(f, "tokenizer.ggml.eos_token_id", v.eos_id));
  TANDEM_RETURN_IF_ERROR(read_id(f, "tokenizer.ggml.unknown_token_id", v.unknown_id));
  TANDEM_RETURN_IF_ERROR(read_flag(f, "tokenizer.ggml.add_bos_token", v.add_bos));
  TANDEM_RETURN_IF_ERROR(read_flag(f, "tokenizer.ggml.add_eos_token", v.add_eos));
  TANDEM_RETURN_IF_ERROR(read_flag(f, "tokenizer.ggml.add_space_prefix", v.add_space_prefix));
  return std::optional<tok::GgufVocab>(std::move(v));
}

Expected<TextSide> load_gguf_text_side(const model::GgufFile& f, const model::ModelConfig& config,
                                       const ChatTemplateChoice& chat_template) {
  TextSide text;
  TANDEM_ASSIGN_OR_RETURN(std::optional<tok::GgufVocab> vocab, gguf_vocab(f));
  std::vector<int32_t> end_ids;
  if (vocab) {
    TANDEM_ASSIGN_OR_RETURN(tok::Tokenizer t, tok::tokenizer_from_gguf(*vocab, f.path()));
    text.tokenizer = std::move(t);
    for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
      int32_t id = -1;
      TANDEM_RETURN_IF_ERROR(read_id(f, key, id));
      if (id >= 0) end_ids.push_back(id);
    }
    const std::vector<int32_t> eog = tok::gguf_end_of_generation_ids(*vocab);
    end_ids.insert(end_ids.end(), eog.begin(), eog.end());
  } else {
    spdlog::warn(
        "{} has no tokenizer.ggml.model: text prompts and chat need a tokenizer; only token-id prompts "
        "will work",
        f.path());
  }
  TANDEM_ASSIGN_OR_RETURN(text.chat_template, gguf_chat_template(f, vocab, chat_template));
  text.stop_tokens = stop_tokens(config, end_ids, text.tokenizer, text.chat_template);
  return text;
}

}  // namespace tandem::runtime
