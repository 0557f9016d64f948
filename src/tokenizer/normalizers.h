// Normalizers of tokenizer.json ("normalizer" field): NFC/NFD/NFKC/NFKD (ICU),
// Lowercase, Prepend, Replace, Strip, StripAccents, Sequence. Immutable after
// construction; normalize() is thread-safe. Unknown types are rejected at
// load with a Status naming the type.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/status.h"

namespace tandem::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// `j` may be null (returns nullptr: no normalization). `where` names the field
// for error messages (e.g. "normalizer").
Expected<std::unique_ptr<Normalizer>> make_normalizer(const nlohmann::json& j, const std::string& where);

// Unicode normalization forms via ICU; `text` must be valid UTF-8.
enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };
void unicode_normalize(std::string& text, UnicodeForm form);

// Full Unicode case mapping (ICU root locale), as Rust's and Python's
// to_lowercase()/lower() and upper(). Input must be valid UTF-8.
std::string unicode_lower(const std::string& text);
std::string unicode_upper(const std::string& text);

}  // namespace tandem::tok
