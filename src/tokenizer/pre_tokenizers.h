// Pre-tokenizers of tokenizer.json ("pre_tokenizer" field): ByteLevel, Split
// (PCRE2 regex or literal, all five delimiter behaviours, invert), Metaspace,
// Digits, Whitespace, WhitespaceSplit, Punctuation, Sequence.
// A pre-tokenizer turns one normalized segment into pieces, emitted in order
// through a callback; empty pieces are never emitted. Immutable and
// thread-safe after construction.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "function_ref.h"

namespace tandem::tok {

// A piece and whether it starts at offset 0 of the original input (Metaspace's
// prepend_scheme "first" needs that).
using PieceSink = FunctionRef<void(std::string_view piece, bool at_input_start)>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::string_view text, bool at_input_start, PieceSink emit) const = 0;
};

// `j` may be null (returns nullptr: the whole segment is one piece).
Expected<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const nlohmann::json& j, const std::string& where);

}  // namespace tandem::tok
