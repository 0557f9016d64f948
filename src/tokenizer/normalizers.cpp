#include "normalizers.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "regex.h"
#include "unicode.h"

namespace tandem::tok {

namespace {

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

std::u16string to_utf16(const std::string& s) {
  std::u16string out(s.size() + 1, u'\0');
  int32_t len = 0;
  UErrorCode err = U_ZERO_ERROR;
  u_strFromUTF8WithSub(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &len, s.data(),
                       static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &err);
  out.resize(U_SUCCESS(err) ? len : 0);
  return out;
}

std::string to_utf8(const std::u16string& s) {
  std::string out(s.size() * 3 + 1, '\0');
  int32_t len = 0;
  UErrorCode err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &len, reinterpret_cast<const UChar*>(s.data()),
              static_cast<int32_t>(s.size()), &err);
  out.resize(U_SUCCESS(err) ? len : 0);
  return out;
}

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(UnicodeForm f) : form_(f) {}
  void normalize(std::string& text) const override { unicode_normalize(text, form_); }

 private:
  UnicodeForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = unicode_lower(text); }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string p) : prefix_(std::move(p)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::string literal, std::shared_ptr<const Regex> re, std::string content)
      : literal_(std::move(literal)), regex_(std::move(re)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    std::string out;
    size_t pos = 0;
    if (regex_) {
      size_t b, e;
      while (pos <= text.size() && regex_->find(text, pos, &b, &e)) {
        out.append(text, pos, b - pos);
        out += content_;
        if (e == b) {
          if (b >= text.size()) {
            pos = text.size() + 1;
            break;
          }
          size_t n = utf8_len(static_cast<unsigned char>(text[b]));
          out.append(text, b, n);
          e = b + n;
        }
        pos = e;
      }
      if (pos < text.size()) out.append(text, pos);
    } else {
      if (literal_.empty()) return;
      size_t b;
      while ((b = text.find(literal_, pos)) != std::string::npos) {
        out.append(text, pos, b - pos);
        out += content_;
        pos = b + literal_.size();
      }
      out.append(text, pos);
    }
    text = std::move(out);
  }

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
  std::string content_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t b = 0, e = text.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!is_unicode_whitespace(next_code_point(text, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t s = e - 1;
        while (s > b && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        size_t i = s;
        if (!is_unicode_whitespace(next_code_point(text, i))) break;
        e = s;
      }
    }
    text = text.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
      size_t s = i;
      char32_t cp = next_code_point(text, i);
      // Hugging Face drops every combining mark (general category M*).
      auto t = u_charType(static_cast<UChar32>(cp));
      if (t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK) continue;
      out.append(text, s, i - s);
    }
    text = std::move(out);
  }
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

namespace {

std::string change_case(const std::string& text, bool upper) {
  if (is_ascii(text)) {
    std::string out = text;
    for (char& c : out) {
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
  }
  std::u16string in = to_utf16(text);
  std::u16string out(in.size() * 3 + 4, u'\0');
  UErrorCode err = U_ZERO_ERROR;
  auto* dst = reinterpret_cast<UChar*>(out.data());
  auto* src = reinterpret_cast<const UChar*>(in.data());
  int32_t n = upper ? u_strToUpper(dst, static_cast<int32_t>(out.size()), src,
                                   static_cast<int32_t>(in.size()), "", &err)
                    : u_strToLower(dst, static_cast<int32_t>(out.size()), src,
                                   static_cast<int32_t>(in.size()), "", &err);
  if (U_FAILURE(err)) return text;
  out.resize(n);
  return to_utf8(out);
}

}  // namespace

std::string unicode_lower(const std::string& text) { return change_case(text, false); }
std::string unicode_upper(const std::string& text) { return change_case(text, true); }

namespace {

const UNormalizer2* icu_normalizer(UnicodeForm form, UErrorCode* err) {
  switch (form) {
    case UnicodeForm::kNfc:
      return unorm2_getNFCInstance(err);
    case UnicodeForm::kNfd:
      return unorm2_getNFDInstance(err);
    case UnicodeForm::kNfkc:
      return unorm2_getNFKCInstance(err);
    case UnicodeForm::kNfkd:
      return unorm2_getNFKDInstance(err);
  }
  *err = U_ILLEGAL_ARGUMENT_ERROR;
  return nullptr;
}

// At load: a form ICU cannot provide (its data library missing, or a
// stand-in: scripts/gpu-test.sh --stub-icu) is an error naming it, never text
// silently left unnormalized.
Expected<std::unique_ptr<Normalizer>> unicode_normalizer(UnicodeForm form, const std::string& type,
                                                         const std::string& where) {
  UErrorCode err = U_ZERO_ERROR;
  if (icu_normalizer(form, &err) == nullptr || U_FAILURE(err))
    return invalid_argument(where + ": the " + type + " normalizer needs ICU's normalization data, which " +
                            "this ICU build cannot load (" + u_errorName(err) + ")");
  return std::unique_ptr<Normalizer>(new UnicodeNormalizer(form));
}

}  // namespace

void unicode_normalize(std::string& text, UnicodeForm form) {
  if (is_ascii(text)) return;
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* n = icu_normalizer(form, &err);
  if (U_FAILURE(err)) return;
  std::u16string in = to_utf16(text);
  if (unorm2_isNormalized(n, reinterpret_cast<const UChar*>(in.data()), static_cast<int32_t>(in.size()),
                          &err) &&
      U_SUCCESS(err))
    return;
  // A guess at the size first; ICU reports the length it needs when the guess
  // is short (NFKC expands one code unit into up to 18, e.g. U+FDFA), and the
  // second call gets exactly that, so no text is ever left half normalized.
  std::u16string out(in.size() * 4 + 8, u'\0');
  int32_t len = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    err = U_ZERO_ERROR;
    len = unorm2_normalize(n, reinterpret_cast<const UChar*>(in.data()), static_cast<int32_t>(in.size()),
                           reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &err);
    if (err != U_BUFFER_OVERFLOW_ERROR) break;
    out.assign(static_cast<size_t>(len), u'\0');
  }
  if (U_FAILURE(err)) return;
  out.resize(len);
  text = to_utf8(out);
}

Expected<std::unique_ptr<Normalizer>> make_normalizer(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return invalid_argument(where + ": expected an object with a string \"type\"");
  const std::string type = j["type"].get<std::string>();
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; };
  if (type == "NFC") return unicode_normalizer(UnicodeForm::kNfc, type, where);
  if (type == "NFD") return unicode_normalizer(UnicodeForm::kNfd, type, where);
  if (type == "NFKC") return unicode_normalizer(UnicodeForm::kNfkc, type, where);
  if (type == "NFKD") return unicode_normalizer(UnicodeForm::kNfkd, type, where);
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new Lowercase());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccents());
  if (type == "Prepend") return std::unique_ptr<Normalizer>(new Prepend(str("prepend")));
  if (type == "Strip") {
    bool l = j.value("strip_left", true), r = j.value("strip_right", true);
    return std::unique_ptr<Normalizer>(new Strip(l, r));
  }
  if (type == "Replace") {
    const auto& p = j.contains("pattern") ? j["pattern"] : nlohmann::json();
    if (p.is_object() && p.contains("String") && p["String"].is_string())
      return std::unique_ptr<Normalizer>(
          new Replace(p["String"].get<std::string>(), nullptr, str("content")));
    if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
      auto re = Regex::compile(p["Regex"].get<std::string>());
      if (!re.ok()) return re.status().with_context(where + ".pattern");
      return std::unique_ptr<Normalizer>(new Replace("", std::move(re).value(), str("content")));
    }
    return invalid_argument(where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return invalid_argument(where + ".normalizers: missing or not an array");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < j["normalizers"].size(); ++i) {
      auto n = make_normalizer(j["normalizers"][i], where + ".normalizers[" + std::to_string(i) + "]");
      if (!n.ok()) return n.status();
      if (*n) parts.push_back(std::move(n).value());
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(parts)));
  }
  return unimplemented(where + ": normalizer type '" + type + "' is not supported");
}

}  // namespace tandem::tok
