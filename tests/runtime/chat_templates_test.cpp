// Which chat template a directory is served with: chat_template.jinja beats
// tokenizer_config.json's (transformers' rule), a template the user gives
// beats both, names resolve to the model's named templates then the
// built-ins, and a bad user template is an error naming the flag.
#include "runtime/chat_templates.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../model/test_util.h"

namespace tandem::runtime {
namespace {

using model::testing::write_file;

std::string fresh_dir(const std::string& name) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tandem_chat_templates_" + name)).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string render_user(const tok::ChatTemplate& t, const std::string& content) {
  tok::ChatRenderInput in;
  in.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
  in.add_generation_prompt = true;
  auto out = t.render(in);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : "";
}

const char* kConfig = R"({"bos_token": "<s>", "eos_token": "</s>",
  "chat_template": [{"name": "default", "template": "D:{{ messages[0]['content'] }}"},
                    {"name": "tool_use", "template": "T:{{ messages[0]['content'] }}"}]})";

TEST(ChatTemplates, JinjaFileBeatsTokenizerConfigAndKeepsItsSpecialTokens) {
  const std::string dir = fresh_dir("jinja");
  write_file(dir + "/tokenizer_config.json", kConfig);
  write_file(dir + "/chat_template.jinja", "{{ bos_token }}J:{{ messages[0]['content'] }}{{ eos_token }}");
  auto t = load_chat_template(dir, {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE(t->has_value());
  EXPECT_EQ(render_user(**t, "hi"), "<s>J:hi</s>");
  EXPECT_EQ((*t)->eos_token(), "</s>");
}

TEST(ChatTemplates, JinjaFileAloneIsRead) {
  const std::string dir = fresh_dir("jinja_alone");
  write_file(dir + "/chat_template.jinja", "J:{{ messages[0]['content'] }}");
  auto t = load_chat_template(dir, {});
  ASSERT_TRUE(t.ok() && t->has_value());
  EXPECT_EQ(render_user(**t, "hi"), "J:hi");
}

TEST(ChatTemplates, WithoutEitherThereIsNone) {
  auto t = load_chat_template(fresh_dir("none"), {});
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->has_value());
}

TEST(ChatTemplates, UserSourceAndNamesWin) {
  const std::string dir = fresh_dir("user");
  write_file(dir + "/tokenizer_config.json", kConfig);
  write_file(dir + "/chat_template.jinja", "J:{{ messages[0]['content'] }}");
  auto source =
      load_chat_template(dir, {"S:{{ messages[0]['content'] }}{{ eos_token }}", "", "--chat-template"});
  ASSERT_TRUE(source.ok() && source->has_value());
  EXPECT_EQ(render_user(**source, "hi"), "S:hi</s>");
  auto named = load_chat_template(dir, {"", "tool_use", "--chat-template tool_use"});
  ASSERT_TRUE(named.ok() && named->has_value());
  EXPECT_EQ(render_user(**named, "hi"), "T:hi");
  auto chatml = load_chat_template(dir, {"", "chatml", "--chat-template chatml"});
  ASSERT_TRUE(chatml.ok() && chatml->has_value());
  EXPECT_EQ(render_user(**chatml, "hi"), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  auto llama3 = load_chat_template(dir, {"", "llama3", "--chat-template llama3"});
  ASSERT_TRUE(llama3.ok() && llama3->has_value());
  EXPECT_EQ(render_user(**llama3, "hi"),
            "<s><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_"
            "header_id|>\n\n");
}

TEST(ChatTemplates, BadUserTemplatesNameTheFlag) {
  const std::string dir = fresh_dir("bad");
  write_file(dir + "/tokenizer_config.json", kConfig);
  auto unknown = load_chat_template(dir, {"", "vicuna", "--chat-template vicuna"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("--chat-template vicuna: not a template of"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("chatml, llama3"), std::string::npos);
  auto broken = load_chat_template(dir, {"{% for %}", "", "--chat-template-file t.jinja"});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().message().rfind("--chat-template-file t.jinja: ", 0), 0u)
      << broken.status().message();
}

}  // namespace
}  // namespace tandem::runtime
