// Tokenizer: a Hugging Face tokenizer.json (BPE model) loaded into memory.
// encode() reproduces Hugging Face `tokenizers` ids exactly: added tokens,
// normalizer, pre-tokenizer, BPE model and post-processor (BOS etc.).
// decode() reproduces its decode(); decode_raw() keeps partial UTF-8 bytes for
// streaming (see streaming.h).
//
// Loading errors (missing file, malformed JSON, unsupported component) come
// back as Status naming the file and the JSON field. A loaded Tokenizer is
// immutable; all methods are thread-safe. Copies share the loaded data.
// Input text that is not valid UTF-8 is repaired (ill-formed bytes become
// U+FFFD) before encoding.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tandem::tok {

class Tokenizer {
 public:
  // Loads `path` (a tokenizer.json file).
  static Expected<Tokenizer> from_file(const std::string& path);
  // Parses tokenizer.json text; `origin` names it in error messages.
  static Expected<Tokenizer> from_json(std::string_view json, const std::string& origin = "tokenizer.json");

  // Token ids of `text`; with add_special_tokens the post-processor's tokens
  // (e.g. BOS) are added, as Hugging Face's encode() does by default.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Like encode(text, false), but the text of a special added token ("<|im_end|>") is
  // ordinary text, tokenized into pieces, not that token: llama.cpp's tokenize with
  // parse_special = false (its control tokens are Hugging Face's special added tokens).
  // Non-special added tokens are still matched, as llama.cpp matches its user-defined ones.
  std::vector<int32_t> encode_special_as_text(std::string_view text) const;

  // Text of `ids`; unknown ids are skipped. Invalid UTF-8 becomes U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // Like decode() but byte-producing decoders keep raw (possibly partial) UTF-8.
  std::string decode_raw(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Token string (vocabulary form, e.g. "Ġhello") or nullopt for unknown ids.
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // One more than the largest id (model vocabulary and added tokens).
  int32_t vocab_size() const;
  bool is_special(int32_t id) const;

  struct Impl;  // opaque; defined in tokenizer.cpp

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tandem::tok
