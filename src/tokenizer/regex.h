// Regex: a compiled PCRE2 pattern (8-bit, UTF + UCP, JIT when available) for
// Split pre-tokenizers and Replace normalizers/decoders. Immutable after
// compile(); find() is thread-safe (per-thread match data).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tandem::tok {

class Regex {
 public:
  // Compiles `pattern`; the error names the pattern and PCRE2's reason/offset.
  static Expected<std::shared_ptr<const Regex>> compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the first match starting at or after byte `start` of `subject`
  // (valid UTF-8). Returns false when there is none.
  bool find(std::string_view subject, size_t start, size_t* match_begin, size_t* match_end) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace tandem::tok
