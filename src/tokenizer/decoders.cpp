#include "decoders.h"

#include <nlohmann/json.hpp>

#include "regex.h"
#include "unicode.h"

namespace tandem::tok {

namespace {

using Ptr = std::unique_ptr<Decoder>;

class ByteLevelDecoder final : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens, bool raw) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      size_t i = 0;
      while (i < t.size()) {
        size_t s = i;
        int b = unicode_to_byte(next_code_point(t, i));
        if (b >= 0)
          bytes.push_back(static_cast<char>(b));
        else
          bytes.append(t, s, i - s);
      }
    }
    tokens.clear();
    tokens.push_back(raw ? std::move(bytes) : utf8_lossy(bytes));
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string rep, bool strip_first) : rep_(std::move(rep)), strip_first_(strip_first) {}
  void decode(std::vector<std::string>& tokens, bool) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string out;
      const std::string& t = tokens[k];
      size_t pos = 0, b;
      while ((b = t.find(rep_, pos)) != std::string::npos) {
        out.append(t, pos, b - pos);
        out.push_back(' ');
        pos = b + rep_.size();
      }
      out.append(t, pos);
      if (k == 0 && strip_first_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
      tokens[k] = std::move(out);
    }
  }

 private:
  std::string rep_;
  bool strip_first_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string lit, std::shared_ptr<const Regex> re, std::string content)
      : lit_(std::move(lit)), re_(std::move(re)), content_(std::move(content)) {}
  void decode(std::vector<std::string>& tokens, bool) const override {
    for (auto& t : tokens) {
      std::string out;
      size_t pos = 0, b, e;
      if (re_) {
        while (pos < t.size() && re_->find(t, pos, &b, &e) && e > b) {
          out.append(t, pos, b - pos);
          out += content_;
          pos = e;
        }
      } else if (!lit_.empty()) {
        while ((b = t.find(lit_, pos)) != std::string::npos) {
          out.append(t, pos, b - pos);
          out += content_;
          pos = b + lit_.size();
        }
      }
      if (pos < t.size()) out.append(t, pos);
      t = std::move(out);
    }
  }

 private:
  std::string lit_;
  std::shared_ptr<const Regex> re_;
  std::string content_;
};

int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int h = hex(t[3]), l = hex(t[4]);
  return h < 0 || l < 0 ? -1 : h * 16 + l;
}

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens, bool raw) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t byte_tokens = 0;
    auto flush = [&] {
      if (!byte_tokens) return;
      if (raw || is_valid_utf8(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < byte_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      byte_tokens = 0;
    };
    for (auto& t : tokens) {
      int b = parse_byte_token(t);
      if (b >= 0) {
        bytes.push_back(static_cast<char>(b));
        ++byte_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens, bool) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.clear();
    tokens.push_back(std::move(all));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode(std::vector<std::string>& tokens, bool) const override {
    if (content_.empty()) return;
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k)
        b += content_.size();
      for (size_t k = 0; k < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<Ptr> parts) : parts_(std::move(parts)) {}
  void decode(std::vector<std::string>& tokens, bool raw) const override {
    for (const auto& p : parts_) p->decode(tokens, raw);
  }

 private:
  std::vector<Ptr> parts_;
};

}  // namespace

Expected<std::unique_ptr<Decoder>> make_decoder(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return Ptr();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return invalid_argument(where + ": expected an object with a string \"type\"");
  const std::string type = j["type"].get<std::string>();
  auto str = [&](const char* k, const char* def) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(def);
  };
  if (type == "ByteLevel") return Ptr(new ByteLevelDecoder());
  if (type == "ByteFallback") return Ptr(new ByteFallbackDecoder());
  if (type == "Fuse") return Ptr(new FuseDecoder());
  if (type == "Strip") {
    auto num = [&](const char* k) -> size_t {
      return j.contains(k) && j[k].is_number_unsigned() ? j[k].get<size_t>() : 0;
    };
    return Ptr(new StripDecoder(str("content", " "), num("start"), num("stop")));
  }
  if (type == "Metaspace") {
    bool strip_first = true;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string())
      strip_first = j["prepend_scheme"].get<std::string>() != "never";
    else if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean())
      strip_first = j["add_prefix_space"].get<bool>();
    return Ptr(new MetaspaceDecoder(str("replacement", "\xE2\x96\x81"), strip_first));
  }
  if (type == "Replace") {
    const auto& p = j.contains("pattern") ? j["pattern"] : nlohmann::json();
    if (p.is_object() && p.contains("String") && p["String"].is_string())
      return Ptr(new ReplaceDecoder(p["String"].get<std::string>(), nullptr, str("content", "")));
    if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
      auto re = Regex::compile(p["Regex"].get<std::string>());
      if (!re.ok()) return re.status().with_context(where + ".pattern");
      return Ptr(new ReplaceDecoder("", std::move(re).value(), str("content", "")));
    }
    return invalid_argument(where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array())
      return invalid_argument(where + ".decoders: missing or not an array");
    std::vector<Ptr> parts;
    for (size_t i = 0; i < j["decoders"].size(); ++i) {
      auto d = make_decoder(j["decoders"][i], where + ".decoders[" + std::to_string(i) + "]");
      if (!d.ok()) return d.status();
      if (*d) parts.push_back(std::move(d).value());
    }
    return Ptr(new SequenceDecoder(std::move(parts)));
  }
  return unimplemented(where + ": decoder type '" + type + "' is not supported");
}

}  // namespace tandem::tok
