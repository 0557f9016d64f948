// Robustness: random bytes into the encoders and mutated templates into the
// Jinja interpreter must give values or Status errors, never crashes (this
// binary also runs under ASan/UBSan).
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "fixtures.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/streaming.h"

namespace tandem::tok {
namespace {

std::string random_bytes(std::mt19937& rng, size_t max_len) {
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::uniform_int_distribution<int> byte(0, 255), pick(0, 9);
  std::string s(len(rng), '\0');
  static const char* kPieces[] = {" ", "\xE2\x96\x81", "<s>", "\xF0\x9F\x98\x80", "\xC3", "\n", "12", "ab"};
  for (auto& c : s) c = static_cast<char>(byte(rng));
  for (int k = pick(rng); k > 0; --k) s += kPieces[pick(rng) % 8];
  return s;
}

TEST(Robustness, RandomBytesEncodeAndDecode) {
  const Tokenizer* tok = testing::shared_tokenizer("llama2");
  if (!tok) GTEST_SKIP() << "run npm ci in tests/tokenizer/npm";
  std::mt19937 rng(1234);
  for (int k = 0; k < 300; ++k) {
    std::string s = random_bytes(rng, 64);
    auto ids = tok->encode(s);
    std::string d = tok->decode(ids);
    StreamingDetokenizer stream(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, d);
  }
  // Random ids, including out-of-range ones.
  std::uniform_int_distribution<int32_t> id(-5, tok->vocab_size() + 5);
  for (int k = 0; k < 100; ++k) {
    std::vector<int32_t> ids(16);
    for (auto& x : ids) x = id(rng);
    (void)tok->decode(ids);
    StreamingDetokenizer stream(*tok);
    for (int32_t x : ids) (void)stream.push(x);
    (void)stream.flush();
  }
}

TEST(Robustness, MutatedTemplatesFailCleanly) {
  std::ifstream in(testing::fixture_path("chat/llama3_2_tools.jinja"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string base = ss.str();
  ASSERT_FALSE(base.empty());
  ChatRenderInput input;
  input.messages =
      nlohmann::ordered_json::parse(R"([{"role":"system","content":"s"},{"role":"user","content":"u"},
      {"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},
      {"role":"tool","content":"r"}])");
  input.tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  std::mt19937 rng(99);
  static const char kChars[] = "{}%#-+()[]'\".|:,=~ \nabcnot if for in is";
  size_t parsed = 0;
  for (int k = 0; k < 300; ++k) {
    std::string t = base;
    std::uniform_int_distribution<int> edits(1, 4);
    for (int e = edits(rng); e > 0; --e) {
      std::uniform_int_distribution<size_t> pos(0, t.size() - 1);
      size_t p = pos(rng);
      switch (rng() % 3) {
        case 0:
          t.erase(p, 1 + rng() % 3);
          break;
        case 1:
          t.insert(p, 1, kChars[rng() % (sizeof(kChars) - 1)]);
          break;
        default:
          t[p] = kChars[rng() % (sizeof(kChars) - 1)];
      }
    }
    auto tpl = ChatTemplate::parse(t);
    if (!tpl.ok()) {
      EXPECT_NE(tpl.status().message().find("line"), std::string::npos) << tpl.status().message();
      continue;
    }
    ++parsed;
    (void)tpl->render(input);
  }
  EXPECT_GT(parsed, 0u);
}

}  // namespace
}  // namespace tandem::tok
