// StreamingDetokenizer: turns generated ids, one at a time, into text deltas
// whose concatenation equals decode(all ids) (for complete UTF-8), never
// emitting a partial UTF-8 sequence: byte-level and byte-fallback tokens that
// split a character are held until the character completes (or flush()).
// One instance per stream; not thread-safe. Holds a reference to the Tokenizer,
// which must outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tandem::tok {

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

  // Adds one id; returns the text that became final (possibly empty).
  std::string push(int32_t id);
  // Returns whatever is still held, with incomplete bytes as U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  static constexpr size_t kMaxHeldIds = 32;

  std::vector<int32_t> ids_;
  size_t prefix_ = 0;            // window start: context so decoders see a previous token
  size_t read_ = 0;              // the text of ids before this has been emitted
  size_t emitted_in_delta_ = 0;  // bytes of the newer ids' text already emitted
  std::string pending_;          // those bytes (to check the window still agrees)
};

}  // namespace tandem::tok
