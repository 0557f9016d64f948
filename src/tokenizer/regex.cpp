#define PCRE2_CODE_UNIT_WIDTH 8
#include "regex.h"

#include <pcre2.h>

namespace tandem::tok {

namespace {

// Per-thread match data and JIT stack, sized for the patterns tokenizers use.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(size_t{32} << 10, size_t{4} << 20, nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

// Hugging Face compiles patterns with Oniguruma, whose Unicode \w is the
// Unicode "word" set (letters, marks, decimal digits, connector punctuation,
// joiners); PCRE2 10.42's \w lacks the marks. Rewrite \w and \W to the
// Oniguruma set, inside and outside character classes.
constexpr const char* kWordSet = "\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";

std::string translate_word_class(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[i + 1];
      ++i;
      if (e == 'w') {
        out += in_class ? std::string(kWordSet) : "[" + std::string(kWordSet) + "]";
      } else if (e == 'W' && !in_class) {
        out += "[^" + std::string(kWordSet) + "]";
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out.push_back(c);
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);  // literal ']'
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

Expected<std::shared_ptr<const Regex>> Regex::compile(std::string_view original) {
  const std::string translated = translate_word_class(original);
  std::string_view pattern = translated;
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(error, buf, sizeof(buf));
    return invalid_argument("regex '" + std::string(original) + "' at offset " + std::to_string(offset) +
                            ": " + reinterpret_cast<const char*>(buf));
  }
  std::shared_ptr<Regex> re(new Regex());
  re->code_ = code;
  re->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Regex>(std::move(re));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Regex::find(std::string_view subject, size_t start, size_t* match_begin, size_t* match_end) const {
  auto& s = scratch();
  auto* code = static_cast<pcre2_code*>(code_);
  auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = jit_ ? pcre2_jit_match(code, subj, subject.size(), start, 0, s.data, s.context)
                : pcre2_match(code, subj, subject.size(), start, PCRE2_NO_UTF_CHECK, s.data, s.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // pathological input: the interpreter keeps its stack on the heap
    rc = pcre2_match(code, subj, subject.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s.data, s.context);
  if (rc < 0) return false;
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
  *match_begin = ov[0];
  *match_end = ov[1];
  return true;
}

}  // namespace tandem::tok
