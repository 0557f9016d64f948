// Golden chat-template renders: tandem's Jinja interpreter against
// @huggingface/jinja (transformers' settings), written by npm/make_goldens.mjs.
#include <gtest/gtest.h>

#include "fixtures.h"
#include "tokenizer/chat_template.h"

namespace tandem::tok {
namespace {

using testing::file_exists;
using testing::fixture_path;
using testing::npm_dir;

nlohmann::ordered_json read_ordered(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::ordered_json::parse(ss.str());
}

std::tm fixed_now() {  // make_goldens.mjs pins the clock to 2025-07-26 12:00 UTC
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 12;
  tm.tm_wday = 6;
  tm.tm_yday = 206;
  return tm;
}

TEST(ChatGolden, RendersMatchHuggingFaceJinja) {
  auto golden = read_ordered(fixture_path("golden/chat_renders.json"));
  auto spec = read_ordered(fixture_path("chat/conversations.json"));
  std::map<std::string, nlohmann::ordered_json> convs;
  for (const auto& c : spec["conversations"]) convs[c["name"].get<std::string>()] = c;
  size_t total = 0, identical = 0, templates = 0;
  for (auto it = golden["templates"].begin(); it != golden["templates"].end(); ++it) {
    const std::string name = it.key();
    const auto& t = it.value();
    std::string source_path = t["source"].get<std::string>().rfind("chat/", 0) == 0
                                  ? fixture_path(t["source"].get<std::string>())
                                  : npm_dir() + t["source"].get<std::string>();
    if (!file_exists(source_path)) {
      std::printf("[ skipped ] %s: %s not installed (npm ci)\n", name.c_str(), source_path.c_str());
      continue;
    }
    Expected<ChatTemplate> tpl = Status(StatusCode::kInternal, "unset");
    if (source_path.size() > 5 && source_path.substr(source_path.size() - 5) == ".json") {
      tpl = ChatTemplate::from_tokenizer_config(source_path);
    } else {
      std::ifstream in(source_path);
      std::stringstream ss;
      ss << in.rdbuf();
      tpl =
          ChatTemplate::parse(ss.str(), t["bos_token"].get<std::string>(), t["eos_token"].get<std::string>());
    }
    ASSERT_TRUE(tpl.ok()) << name << ": " << tpl.status().to_string();
    ++templates;
    if (t["bos_token"].is_string()) {
      EXPECT_EQ(tpl->bos_token(), t["bos_token"].get<std::string>()) << name;
    }
    for (const auto& r : t["renders"]) {
      const auto& conv = convs.at(r["conversation"].get<std::string>());
      ChatRenderInput in;
      in.messages = conv["messages"];
      if (conv.contains("tools")) in.tools = conv["tools"];
      if (conv.contains("extra")) in.extra = conv["extra"];
      in.add_generation_prompt = r["add_generation_prompt"].get<bool>();
      in.now = fixed_now();
      auto got = tpl->render(in);
      ++total;
      std::string where = name + " / " + r["conversation"].get<std::string>() +
                          (in.add_generation_prompt ? " +generation prompt" : "");
      if (r["error"].is_string()) {
        EXPECT_FALSE(got.ok()) << where << ": expected error '" << r["error"].get<std::string>() << "'";
        if (!got.ok()) {
          EXPECT_NE(got.status().message().find(r["error"].get<std::string>()), std::string::npos)
              << where << ": " << got.status().message();
          ++identical;
        }
        continue;
      }
      ASSERT_TRUE(got.ok()) << where << ": " << got.status().to_string();
      EXPECT_EQ(*got, r["text"].get<std::string>()) << where;
      identical += *got == r["text"].get<std::string>();
    }
  }
  std::printf("[ golden  ] chat templates: %zu templates, %zu/%zu renders identical\n", templates, identical,
              total);
}

}  // namespace
}  // namespace tandem::tok
