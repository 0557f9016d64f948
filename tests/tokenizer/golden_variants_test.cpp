// Golden ids for tokenizer variants: the packaged tokenizer.json files with
// components swapped as described in variants.json (same patch as
// npm/make_goldens.mjs), compared with Hugging Face `tokenizers`.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace tandem::tok {
namespace {

using testing::file_exists;
using testing::fixture_path;
using testing::read_json;
using testing::tokenizer_path;

nlohmann::json apply_variant(nlohmann::json base, const nlohmann::json& v) {
  if (v.contains("set"))
    for (auto it = v["set"].begin(); it != v["set"].end(); ++it) base[it.key()] = it.value();
  if (v.contains("model"))
    for (auto it = v["model"].begin(); it != v["model"].end(); ++it) base["model"][it.key()] = it.value();
  if (v.contains("add_tokens"))
    for (const auto& t : v["add_tokens"]) base["added_tokens"].push_back(t);
  return base;
}

TEST(GoldenVariants, MatchHuggingFace) {
  auto variants = read_json(fixture_path("variants.json"));
  auto golden = read_json(fixture_path("golden/ids_variants.json"));
  auto corpus = read_json(fixture_path("corpus.json"));
  std::vector<std::string> texts;
  for (size_t i = 0; i < corpus.size() && i < 265; i += 3) texts.push_back(corpus[i].get<std::string>());
  std::map<std::string, nlohmann::json> bases;
  for (const auto& v : variants) {
    const std::string name = v["name"].get<std::string>(), base = v["base"].get<std::string>();
    if (!file_exists(tokenizer_path(base))) GTEST_SKIP() << "run npm ci in tests/tokenizer/npm";
    if (!bases.count(base)) bases[base] = read_json(tokenizer_path(base));
    auto tok = Tokenizer::from_json(apply_variant(bases[base], v).dump(), name);
    ASSERT_TRUE(tok.ok()) << name << ": " << tok.status().to_string();
    const auto& cases = golden["variants"][name];
    ASSERT_EQ(cases.size(), texts.size()) << name;
    size_t ok = 0, dec_ok = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto g = testing::golden_case(cases[i], texts[i]);
      const auto& want = g.ids;
      auto got = tok->encode(texts[i]);
      ok += got == want;
      EXPECT_EQ(got, want) << name << ": " << texts[i];
      std::string dec = tok->decode(want, false), dec_skip = tok->decode(want, true);
      EXPECT_EQ(dec, g.decoded) << name << " decode: " << texts[i];
      EXPECT_EQ(dec_skip, g.decoded_skip) << name << " decode(skip): " << texts[i];
      dec_ok += dec == g.decoded && dec_skip == g.decoded_skip;
    }
    std::printf("[ golden  ] variant %s: ids %zu/%zu, decodes %zu/%zu\n", name.c_str(), ok, texts.size(),
                dec_ok, texts.size());
  }
}

}  // namespace
}  // namespace tandem::tok
