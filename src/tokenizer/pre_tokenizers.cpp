#include "pre_tokenizers.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>
#include <vector>

#include "regex.h"
#include "unicode.h"

namespace tandem::tok {

namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin, end;
  bool is_match;
};

// Applies a delimiter behaviour to the full cover of `text` by match/non-match
// spans, emitting the resulting non-empty pieces (Hugging Face's semantics).
void emit_with_behavior(std::string_view text, bool at_start, const std::vector<Span>& spans,
                        Behavior behavior, PieceSink emit) {
  std::vector<std::pair<size_t, size_t>> acc;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const auto& s : spans)
        if (!s.is_match) acc.emplace_back(s.begin, s.end);
      break;
    case Behavior::kIsolated:
      for (const auto& s : spans) acc.emplace_back(s.begin, s.end);
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !acc.empty())
          acc.back().second = s.end;
        else
          acc.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t k = spans.size(); k-- > 0;) {
        const auto& s = spans[k];
        if (s.is_match && !previous_match && !acc.empty())
          acc.back().first = s.begin;
        else
          acc.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    case Behavior::kContiguous:
      for (size_t k = 0; k < spans.size(); ++k) {
        const auto& s = spans[k];
        if (k > 0 && s.is_match == previous_match)
          acc.back().second = s.end;
        else
          acc.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
  }
  for (const auto& [b, e] : acc)
    if (e > b) emit(text.substr(b, e - b), at_start && b == 0);
}

// Covers `text` by the matches of `re` and the gaps between them.
void regex_spans(const Regex& re, std::string_view text, bool invert, std::vector<Span>& spans) {
  spans.clear();
  size_t pos = 0, prev = 0;
  size_t b, e;
  while (pos <= text.size() && re.find(text, pos, &b, &e)) {
    if (e == b) {  // empty match: skip one character
      if (b >= text.size()) break;
      pos = b + utf8_len(static_cast<unsigned char>(text[b]));
      continue;
    }
    if (b > prev) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = pos = e;
  }
  if (prev < text.size()) spans.push_back({prev, text.size(), invert});
}

class SplitRegex final : public PreTokenizer {
 public:
  SplitRegex(std::shared_ptr<const Regex> re, Behavior b, bool invert)
      : re_(std::move(re)), behavior_(b), invert_(invert) {}
  void pre_tokenize(std::string_view text, bool at_start, PieceSink emit) const override {
    if (behavior_ == Behavior::kIsolated) {  // fast path: emit as we match
      size_t pos = 0, prev = 0, b, e;
      while (pos <= text.size() && re_->find(text, pos, &b, &e)) {
        if (e == b) {
          if (b >= text.size()) break;
          pos = b + utf8_len(static_cast<unsigned char>(text[b]));
          continue;
        }
        if (b > prev) emit(text.substr(prev, b - prev), at_start && prev == 0);
        emit(text.substr(b, e - b), at_start && b == 0);
        prev = pos = e;
      }
      if (prev < text.size()) emit(text.substr(prev), at_start && prev == 0);
      return;
    }
    std::vector<Span> spans;
    regex_spans(*re_, text, invert_, spans);
    emit_with_behavior(text, at_start, spans, behavior_, emit);
  }

 private:
  std::shared_ptr<const Regex> re_;
  Behavior behavior_;
  bool invert_;
};

class SplitLiteral final : public PreTokenizer {
 public:
  SplitLiteral(std::string lit, Behavior b, bool invert)
      : lit_(std::move(lit)), behavior_(b), invert_(invert) {}
  void pre_tokenize(std::string_view text, bool at_start, PieceSink emit) const override {
    std::vector<Span> spans;
    size_t prev = 0, b;
    if (!lit_.empty()) {
      while ((b = text.find(lit_, prev)) != std::string_view::npos) {
        if (b > prev) spans.push_back({prev, b, invert_});
        spans.push_back({b, b + lit_.size(), !invert_});
        prev = b + lit_.size();
      }
    }
    if (prev < text.size()) spans.push_back({prev, text.size(), invert_});
    emit_with_behavior(text, at_start, spans, behavior_, emit);
  }

 private:
  std::string lit_;
  Behavior behavior_;
  bool invert_;
};

// Splits by a per-code-point class; `behavior` applies to runs/points of class.
class CharClassSplit final : public PreTokenizer {
 public:
  using Pred = bool (*)(char32_t);
  CharClassSplit(Pred pred, Behavior b) : pred_(pred), behavior_(b) {}
  void pre_tokenize(std::string_view text, bool at_start, PieceSink emit) const override {
    std::vector<Span> spans;
    size_t i = 0;
    while (i < text.size()) {
      size_t s = i;
      bool m = pred_(next_code_point(text, i));
      if (!m && !spans.empty() && !spans.back().is_match)
        spans.back().end = i;  // gaps between matches are one span
      else
        spans.push_back({s, i, m});
    }
    emit_with_behavior(text, at_start, spans, behavior_, emit);
  }

 private:
  Pred pred_;
  Behavior behavior_;
};

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  return u_ispunct(static_cast<UChar32>(c));
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::shared_ptr<const Regex> re)
      : add_prefix_space_(add_prefix_space), re_(std::move(re)) {}
  void pre_tokenize(std::string_view text, bool at_start, PieceSink emit) const override {
    std::string prefixed;
    if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
      prefixed.reserve(text.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(text);
      text = prefixed;
    }
    auto map_and_emit = [&](std::string_view piece, bool start) {
      // One reusable buffer per nesting level: a ByteLevel nested in another's
      // output must not overwrite the text it is reading.
      thread_local std::deque<std::string> buffers;  // deque: growing keeps references valid
      thread_local size_t depth = 0;
      if (buffers.size() <= depth) buffers.resize(depth + 1);
      std::string& mapped = buffers[depth];
      mapped.clear();
      const auto& table = byte_to_unicode();
      for (char c : piece) mapped += table[static_cast<unsigned char>(c)];
      ++depth;
      emit(mapped, start);
      --depth;
    };
    if (!re_) {
      if (!text.empty()) map_and_emit(text, at_start);
      return;
    }
    SplitRegex split(re_, Behavior::kIsolated, false);
    split.pre_tokenize(text, at_start, map_and_emit);
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> re_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  Metaspace(std::string replacement, Prepend scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::string_view text, bool at_start, PieceSink emit) const override {
    std::string s;
    s.reserve(text.size() + replacement_.size());
    for (char c : text) {
      if (c == ' ')
        s += replacement_;
      else
        s.push_back(c);
    }
    bool starts = s.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts && (scheme_ == Prepend::kAlways || (scheme_ == Prepend::kFirst && at_start)))
      s.insert(0, replacement_);
    if (!split_) {
      if (!s.empty()) emit(s, at_start);
      return;
    }
    SplitLiteral split(replacement_, Behavior::kMergedWithNext, false);
    split.pre_tokenize(s, at_start, emit);
  }

 private:
  std::string replacement_;
  Prepend scheme_;
  bool split_;
};

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(std::string_view text, bool at_start, PieceSink emit) const override {
    run(0, text, at_start, emit);
  }

 private:
  void run(size_t k, std::string_view text, bool at_start, PieceSink emit) const {
    if (k == parts_.size()) {
      emit(text, at_start);
      return;
    }
    parts_[k]->pre_tokenize(text, at_start, [&](std::string_view p, bool s) { run(k + 1, p, s, emit); });
  }
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Expected<Behavior> parse_behavior(const nlohmann::json& j, const std::string& where) {
  std::string b = j.is_string() ? j.get<std::string>() : "";
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return invalid_argument(where + ".behavior: unknown delimiter behavior '" + b + "'");
}

}  // namespace

Expected<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const nlohmann::json& j,
                                                           const std::string& where) {
  using Ptr = std::unique_ptr<PreTokenizer>;
  if (j.is_null()) return Ptr();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return invalid_argument(where + ": expected an object with a string \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return invalid_argument(where + ".pretokenizers: missing or not an array");
    std::vector<Ptr> parts;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      auto p = make_pre_tokenizer(j["pretokenizers"][i], where + ".pretokenizers[" + std::to_string(i) + "]");
      if (!p.ok()) return p.status();
      if (*p) parts.push_back(std::move(p).value());
    }
    return Ptr(new SequencePre(std::move(parts)));
  }
  if (type == "ByteLevel") {
    std::shared_ptr<const Regex> re;
    if (j.value("use_regex", true)) {
      auto r = Regex::compile(kGpt2Pattern);
      if (!r.ok()) return r.status();
      re = std::move(r).value();
    }
    return Ptr(new ByteLevel(j.value("add_prefix_space", true), std::move(re)));
  }
  if (type == "Split") {
    auto behavior = parse_behavior(j.contains("behavior") ? j["behavior"] : nlohmann::json(), where);
    if (!behavior.ok()) return behavior.status();
    bool invert = j.value("invert", false);
    const auto& p = j.contains("pattern") ? j["pattern"] : nlohmann::json();
    if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
      auto re = Regex::compile(p["Regex"].get<std::string>());
      if (!re.ok()) return re.status().with_context(where + ".pattern");
      return Ptr(new SplitRegex(std::move(re).value(), *behavior, invert));
    }
    if (p.is_object() && p.contains("String") && p["String"].is_string())
      return Ptr(new SplitLiteral(p["String"].get<std::string>(), *behavior, invert));
    return invalid_argument(where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (type == "Metaspace") {
    std::string rep = j.contains("replacement") && j["replacement"].is_string()
                          ? j["replacement"].get<std::string>()
                          : "\xE2\x96\x81";
    Metaspace::Prepend scheme = Metaspace::Prepend::kAlways;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      std::string s = j["prepend_scheme"].get<std::string>();
      if (s == "first")
        scheme = Metaspace::Prepend::kFirst;
      else if (s == "never")
        scheme = Metaspace::Prepend::kNever;
      else if (s != "always")
        return invalid_argument(where + ".prepend_scheme: unknown value '" + s + "'");
    } else if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() &&
               !j["add_prefix_space"].get<bool>()) {
      scheme = Metaspace::Prepend::kNever;
    }
    return Ptr(new Metaspace(rep, scheme, j.value("split", true)));
  }
  if (type == "Digits") {
    bool individual = j.value("individual_digits", false);
    return Ptr(new CharClassSplit(is_numeric, individual ? Behavior::kIsolated : Behavior::kContiguous));
  }
  if (type == "Punctuation") {
    auto behavior = j.contains("behavior") ? parse_behavior(j["behavior"], where)
                                           : Expected<Behavior>(Behavior::kIsolated);
    if (!behavior.ok()) return behavior.status();
    return Ptr(new CharClassSplit(is_punctuation, *behavior));
  }
  if (type == "WhitespaceSplit") {
    return Ptr(new CharClassSplit([](char32_t c) { return is_unicode_whitespace(c); }, Behavior::kRemoved));
  }
  if (type == "Whitespace") {
    auto re = Regex::compile(R"(\w+|[^\w\s]+)");
    if (!re.ok()) return re.status();
    return Ptr(new SplitRegex(std::move(re).value(), Behavior::kRemoved, true));
  }
  return unimplemented(where + ": pre-tokenizer type '" + type + "' is not supported");
}

}  // namespace tandem::tok
