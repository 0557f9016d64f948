// tokenizer.ggml.* metadata → tokenizer.json (tok::tokenizer_from_gguf) on
// small hand-made vocabularies: the SentencePiece merge order rebuilt from
// scores (transformers' rule, worked by hand below), special tokens from token
// types, add_bos, the end-of-generation ids, and each malformed case as a
// Status naming the key. (Whole real vocabularies against Hugging Face's ids:
// tests/runtime/gguf_golden_test.cpp.)
#include "tokenizer/gguf_vocab.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tandem::tok {
namespace {

// <unk> <s> </s> ▁ a b ab ba aba ▁a
GgufVocab sentencepiece_vocab() {
  GgufVocab v;
  v.model = "llama";
  v.tokens = {"<unk>",
              "<s>",
              "</s>",
              "\xE2\x96\x81",
              "a",
              "b",
              "ab",
              "ba",
              "aba",
              "\xE2\x96\x81"
              "a"};
  v.scores = {0, 0, 0, -10, -11, -12, -1, -2, -3, -4};
  v.token_types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  v.bos_id = 1;
  v.eos_id = 2;
  v.unknown_id = 0;
  return v;
}

TEST(GgufVocab, SentencePieceMergesFollowTheScores) {
  auto text = tokenizer_json_from_gguf(sentencepiece_vocab(), "t.gguf");
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  const auto j = nlohmann::json::parse(*text);
  // By score, highest first: ab (-1): a+b; ba (-2): b+a; aba (-3): its splits a+ba, ab+a,
  // ordered by the pieces' ids (a=4 < ab=6); ▁a (-4): ▁+a.
  const auto want =
      nlohmann::json::parse(R"([["a", "b"], ["b", "a"], ["a", "ba"], ["ab", "a"], ["\u2581", "a"]])");
  EXPECT_EQ(j["model"]["merges"], want);
  EXPECT_EQ(j["model"]["unk_token"], "<unk>");
  EXPECT_TRUE(j["model"]["byte_fallback"].get<bool>());
  ASSERT_EQ(j["added_tokens"].size(), 3u);
  EXPECT_TRUE(j["added_tokens"][1]["special"].get<bool>());
}

TEST(GgufVocab, SentencePieceTokenizerEncodesWithBosAndSpacePrefix) {
  auto t = tokenizer_from_gguf(sentencepiece_vocab(), "t.gguf");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  // "aba" → "▁aba": ▁+a merges last-ranked... ranks: a+b(0) first → ▁ a b a → ▁ ab a → (ab,a) rank 3
  // beats (▁,a) rank 4 → ▁ aba.
  EXPECT_EQ(t->encode("aba", true), (std::vector<int32_t>{1, 3, 8}));
  EXPECT_EQ(t->encode("aba", false), (std::vector<int32_t>{3, 8}));
  EXPECT_EQ(t->decode(std::vector<int32_t>{1, 3, 8}, true), "aba");
  GgufVocab no_prefix = sentencepiece_vocab();
  no_prefix.add_space_prefix = false;
  no_prefix.add_bos = false;
  auto u = tokenizer_from_gguf(no_prefix, "t.gguf");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->encode("ab a", true), (std::vector<int32_t>{6, 9}));
}

GgufVocab byte_level_vocab() {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "qwen2";
  v.tokens = {"a",
              "b",
              "ab",
              "\xC4\xA0",
              "\xC4\xA0"
              "ab",
              "<|im_end|>",
              "<think>"};
  v.token_types = {1, 1, 1, 1, 1, 3, 4};
  v.merges = {"a b", "\xC4\xA0 ab"};
  v.eos_id = 5;
  return v;
}

TEST(GgufVocab, ByteLevelTokenizerAndEndOfGeneration) {
  auto t = tokenizer_from_gguf(byte_level_vocab(), "t.gguf");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->encode("ab ab<|im_end|><think>", true), (std::vector<int32_t>{2, 4, 5, 6}));
  EXPECT_TRUE(t->is_special(5));
  EXPECT_FALSE(t->is_special(6));
  EXPECT_EQ(gguf_end_of_generation_ids(byte_level_vocab()), (std::vector<int32_t>{5}));
}

TEST(GgufVocab, MalformedMetadataIsNamed) {
  auto message = [](const GgufVocab& v) {
    auto t = tokenizer_json_from_gguf(v, "t.gguf");
    return t.ok() ? std::string() : t.status().message();
  };
  GgufVocab v = byte_level_vocab();
  v.pre = "tekken";
  EXPECT_EQ(
      message(v),
      "t.gguf: tokenizer.ggml.pre \"tekken\" is not supported (supported: default, gpt2, llama-bpe, llama3, "
      "qwen2, deepseek-r1-qwen)");
  v = byte_level_vocab();
  v.model = "bert";
  EXPECT_EQ(message(v), "t.gguf: tokenizer.ggml.model \"bert\" is not supported (supported: gpt2, llama)");
  v = byte_level_vocab();
  v.token_types.pop_back();
  EXPECT_EQ(message(v), "t.gguf: tokenizer.ggml.token_type has 6 entries for 7 tokens");
  v = byte_level_vocab();
  v.eos_id = 7;
  EXPECT_EQ(message(v), "t.gguf: tokenizer.ggml.eos_token_id 7 is not a token id (7 tokens)");
  v = byte_level_vocab();
  v.merges.clear();
  EXPECT_EQ(message(v), "t.gguf: a \"gpt2\" tokenizer needs tokenizer.ggml.merges");
  v = sentencepiece_vocab();
  v.scores.clear();
  EXPECT_EQ(message(v), "t.gguf: a \"llama\" tokenizer needs tokenizer.ggml.scores or tokenizer.ggml.merges");
  v = byte_level_vocab();
  v.tokens[0] = "\xFF";  // not UTF-8
  EXPECT_NE(message(v).find("t.gguf: tokenizer.ggml.tokens: "), std::string::npos);
  v.tokens.clear();
  EXPECT_EQ(message(v), "t.gguf: tokenizer.ggml.tokens is empty");
}

}  // namespace
}  // namespace tandem::tok
