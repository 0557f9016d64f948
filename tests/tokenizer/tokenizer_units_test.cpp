// Fast unit tests on small synthetic tokenizer.json files: load errors name
// the field, byte-level/byte-fallback decoding, streaming detokenization.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/streaming.h"
#include "tokenizer/tokenizer.h"

namespace tandem::tok {
namespace {

// GPT-2's byte -> code point table, rebuilt here so the test does not depend
// on tandem's internals.
std::string byte_char(int b) {
  static std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int n = 0;
    for (int x = 0; x < 256; ++x) {
      bool printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
      uint32_t cp = printable ? x : 256 + n++;
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      t[x] = s;
    }
    return t;
  }();
  return table[b];
}

// Byte-level BPE: 256 byte tokens, merges "h e", "he l", "hel l", "hell o", "Ġ w".
nlohmann::json byte_level_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  std::vector<std::string> merges = {"h e", "he l", "hel l", "hell o", "Ġ w"};
  int id = 256;
  for (const auto& m : merges) {
    std::string merged = m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1);
    vocab[merged] = id++;
  }
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["added_tokens"] = nlohmann::json::array(
      {{{"id", 261}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}});
  return j;
}

// SentencePiece-style BPE with byte fallback: "▁", a few letters, <0x00>..<0xFF>.
nlohmann::json byte_fallback_json() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  int id = 3;
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = id++;
  }
  for (const char* t : {"\xE2\x96\x81", "a", "b",
                        "\xE2\x96\x81"
                        "a"})
    vocab[t] = id++;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"},
                {"vocab", vocab},
                {"merges", {"\xE2\x96\x81 a"}},
                {"byte_fallback", true},
                {"unk_token", "<unk>"}};
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  j["added_tokens"] = nlohmann::json::array({{{"id", 1}, {"content", "<s>"}, {"special", true}}});
  return j;
}

Tokenizer load(const nlohmann::json& j) {
  auto t = Tokenizer::from_json(j.dump(), "test.json");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(t).value();
}

std::string load_error(const std::string& text) {
  auto t = Tokenizer::from_json(text, "bad.json");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : t.status().message();
}

// encode_special_as_text (llama.cpp's parse_special = false, what llama-server's [["text", bias]]
// logit_bias uses): a special added token's text is ordinary text, split into byte-level pieces
// that decode back to it; a non-special added token is still matched whole (llama.cpp's
// user-defined tokens); encode() is unchanged.
TEST(TokenizerSpecialText, SpecialTokensTextIsOrdinaryText) {
  auto j = byte_level_json();
  j["added_tokens"].push_back(
      {{"id", 262}, {"content", "<tool>"}, {"special", false}, {"normalized", false}});
  const Tokenizer t = load(j);
  const std::string text = "hello<|end|> w<tool>";
  // hello = 259, Ġw = 260, bytes are their own ids.
  EXPECT_EQ(t.encode(text, false), std::vector<int32_t>({259, 261, 260, 262}));
  const std::vector<int32_t> as_text = t.encode_special_as_text(text);
  EXPECT_EQ(as_text, std::vector<int32_t>({259, '<', '|', 'e', 'n', 'd', '|', '>', 260, 262}));
  EXPECT_EQ(t.decode(as_text), text);
  EXPECT_EQ(t.encode_special_as_text("<|end|>"), std::vector<int32_t>({'<', '|', 'e', 'n', 'd', '|', '>'}));
}

TEST(TokenizerErrors, NameTheFileAndField) {
  EXPECT_NE(load_error("{not json").find("bad.json"), std::string::npos);
  EXPECT_NE(load_error("{}").find("model"), std::string::npos);
  auto j = byte_level_json();
  j["pre_tokenizer"] = {{"type", "Frobnicate"}};
  std::string e = load_error(j.dump());
  EXPECT_NE(e.find("pre_tokenizer"), std::string::npos) << e;
  EXPECT_NE(e.find("Frobnicate"), std::string::npos) << e;
  j = byte_level_json();
  j["model"]["merges"].push_back("zz qq");
  e = load_error(j.dump());
  EXPECT_NE(e.find("model.merges[5]"), std::string::npos) << e;
  j = byte_level_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  e = load_error(j.dump());
  EXPECT_NE(e.find("pre_tokenizer.pattern"), std::string::npos) << e;
  j = byte_level_json();
  j["model"]["type"] = "Unigram";
  EXPECT_NE(load_error(j.dump()).find("Unigram"), std::string::npos);
  j = byte_level_json();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Precompiled"}}}}};
  EXPECT_NE(load_error(j.dump()).find("normalizer.normalizers[0]"), std::string::npos);
  j = byte_level_json();
  j["model"]["vocab"]["x"] = "not a number";
  EXPECT_NE(load_error(j.dump()).find("model.vocab['x']"), std::string::npos);
  auto missing = Tokenizer::from_file("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

// A vocab whose ids run far past its size is an error naming the field, not a
// multi-gigabyte table (found by fuzz_tokenizer: one id of ~70 million).
TEST(TokenizerErrors, SparseVocabIdsAreAnError) {
  nlohmann::json j = byte_level_json();
  j["model"]["vocab"]["far"] = 70000000;
  const std::string e = load_error(j.dump());
  EXPECT_NE(e.find("model.vocab"), std::string::npos) << e;
  EXPECT_NE(e.find("70000000"), std::string::npos) << e;
}

TEST(ByteLevel, EncodesMergesAndAddedTokens) {
  Tokenizer t = load(byte_level_json());
  // "hello" -> one merged token (259 = "hello"), " w" merged, "orld" bytes.
  auto ids = t.encode("hello world<|end|>");
  std::vector<int32_t> want = {259, 260, 'o', 'r', 'l', 'd', 261};
  EXPECT_EQ(ids, want);
  EXPECT_EQ(t.decode(ids), "hello world<|end|>");
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "hello world");
  EXPECT_TRUE(t.is_special(261));
  EXPECT_EQ(t.token_to_id("<|end|>"), 261);
  EXPECT_EQ(t.id_to_token(260), "\xC4\xA0w");
  EXPECT_FALSE(t.id_to_token(12345).has_value());
  EXPECT_EQ(t.vocab_size(), 262);
}

// NFKC may expand one UTF-16 unit into many (U+FDFA into 18): the result must be
// the whole normalized text even past the first size guess (4x + 8 units; 5 units
// in, 39 out here). Expected text: Python's unicodedata.normalize("NFKC", ...).
TEST(Normalizers, NfkcExpandsPastTheFirstBufferGuess) {
  nlohmann::json j = byte_level_json();
  j["normalizer"] = {{"type", "NFKC"}};
  Tokenizer t = load(j);
  const std::string in = "a\xEF\xB7\xBA\xEF\xB7\xBA b";  // a U+FDFA U+FDFA b
  const std::string want =
      "\x61\xD8\xB5\xD9\x84\xD9\x89\x20\xD8\xA7\xD9\x84\xD9\x84\xD9\x87\x20\xD8\xB9\xD9\x84\xD9\x8A\xD9\x87"
      "\x20\xD9\x88\xD8\xB3\xD9\x84\xD9\x85\xD8\xB5\xD9\x84\xD9\x89\x20\xD8\xA7\xD9\x84\xD9\x84\xD9\x87\x20"
      "\xD8\xB9\xD9\x84\xD9\x8A\xD9\x87\x20\xD9\x88\xD8\xB3\xD9\x84\xD9\x85\x20\x62";
  EXPECT_EQ(t.decode(t.encode(in)), want);
}

TEST(ByteLevel, InvalidUtf8InputIsRepairedAndDecodedLossily) {
  Tokenizer t = load(byte_level_json());
  auto ids = t.encode(
      "a\xFF"
      "b");
  EXPECT_EQ(t.decode(ids),
            "a\xEF\xBF\xBD"
            "b");
  // A lone lead byte decodes to U+FFFD; the raw decode keeps it for streaming.
  std::vector<int32_t> partial = {0xF0, 0x9F};
  EXPECT_EQ(t.decode(partial), "\xEF\xBF\xBD");
  EXPECT_EQ(t.decode_raw(partial), "\xF0\x9F");
}

TEST(ByteFallback, UnknownCharactersBecomeBytes) {
  Tokenizer t = load(byte_fallback_json());
  auto ids = t.encode("a \xC3\xA9");  // "▁a", "▁", <0xC3>, <0xA9>
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(t.id_to_token(ids[0]),
            "\xE2\x96\x81"
            "a");
  EXPECT_EQ(t.id_to_token(ids[2]), "<0xC3>");
  EXPECT_EQ(t.decode(ids), "a \xC3\xA9");
  // An incomplete byte sequence decodes to one U+FFFD per byte, as HF does.
  std::vector<int32_t> cut = {ids[0], ids[1], ids[2]};
  EXPECT_EQ(t.decode(cut), "a \xEF\xBF\xBD");
}

std::string stream_all(const Tokenizer& t, const std::vector<int32_t>& ids,
                       std::vector<std::string>* deltas) {
  StreamingDetokenizer s(t);
  std::string out;
  for (int32_t id : ids) {
    std::string d = s.push(id);
    deltas->push_back(d);
    out += d;
  }
  std::string tail = s.flush();
  deltas->push_back(tail);
  return out + tail;
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(Streaming, NeverEmitsPartialUtf8) {
  for (const auto& j : {byte_level_json(), byte_fallback_json()}) {
    Tokenizer t = load(j);
    for (const std::string text : {"hello \xF0\x9F\x98\x80 w\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD!", "a b a",
                                   "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 ab"}) {
      auto ids = t.encode(text, false);
      std::vector<std::string> deltas;
      std::string streamed = stream_all(t, ids, &deltas);
      EXPECT_EQ(streamed, t.decode(ids)) << text;
      for (const auto& d : deltas) EXPECT_TRUE(valid_utf8(d)) << "partial UTF-8 emitted for " << text;
    }
  }
}

TEST(Streaming, HoldsSplitCharacterUntilComplete) {
  Tokenizer t = load(byte_level_json());
  StreamingDetokenizer s(t);
  EXPECT_EQ(s.push('a'), "a");
  EXPECT_EQ(s.push(0xF0), "");
  EXPECT_EQ(s.push(0x9F), "");
  EXPECT_EQ(s.push(0x98), "");
  EXPECT_EQ(s.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(s.push(0xF0), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");  // an unfinished character at the end
}

TEST(Streaming, LongStreamsStayCorrect) {
  Tokenizer t = load(byte_fallback_json());
  std::string text;
  for (int k = 0; k < 200; ++k) text += k % 7 == 0 ? "\xC3\xA9 " : "a b ";
  auto ids = t.encode(text, false);
  std::vector<std::string> deltas;
  EXPECT_EQ(stream_all(t, ids, &deltas), t.decode(ids));
}

}  // namespace
}  // namespace tandem::tok

namespace tandem::tok {
namespace {

TEST(AddedTokens, IdsFollowHuggingFaceAssignment) {
  // An added token whose "id" disagrees with the vocabulary gets the id
  // Hugging Face would give it: the next free id after the vocabulary.
  auto j = byte_level_json();
  j["added_tokens"][0]["id"] = 999;
  Tokenizer t = load(j);
  EXPECT_EQ(t.token_to_id("<|end|>"), 261);
}

}  // namespace
}  // namespace tandem::tok

namespace tandem::tok {
namespace {

TEST(Streaming, InvalidBytesDoNotStallTheStream) {
  Tokenizer t = load(byte_level_json());
  StreamingDetokenizer s(t);
  std::string out;
  // Lone lead bytes followed by more lead bytes: each earlier one is final (U+FFFD).
  for (int k = 0; k < 1000; ++k) out += s.push(0xF0);
  out += s.push('a');
  out += s.flush();
  std::vector<int32_t> ids(1000, 0xF0);
  ids.push_back('a');
  EXPECT_EQ(out, t.decode(ids));
}

TEST(Streaming, SkippedSpecialTokensKeepWindowSmall) {
  Tokenizer t = load(byte_level_json());
  StreamingDetokenizer s(t, /*skip_special_tokens=*/true);
  std::string out;
  for (int k = 0; k < 5000; ++k) out += s.push(261);  // <|end|>, skipped
  out += s.push('o') + s.push('k');
  EXPECT_EQ(out + s.flush(), "ok");
}

}  // namespace
}  // namespace tandem::tok

namespace tandem::tok {
namespace {

TEST(PreTokenizers, NestedByteLevelIsSafe) {
  // Unusual but loadable: two ByteLevel pre-tokenizers in a row.
  auto j = byte_level_json();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  Tokenizer t = load(j);
  for (int k = 0; k < 50; ++k)
    (void)t.encode("hello world, this is a longer piece of text \xC3\xA9\xE4\xBD\xA0");
}

}  // namespace
}  // namespace tandem::tok
