#include "tokenizer/chat_template.h"

#include "core/mapped_file.h"
#include "jinja/jinja_ast.h"
#include "jinja/jinja_eval.h"

namespace tandem::tok {

namespace {

std::string token_text(const nlohmann::ordered_json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string())
    return j["content"].get<std::string>();
  return "";
}

jinja::Value strftime_function(std::optional<std::tm> fixed) {
  return jinja::Value::callable([fixed](jinja::Args& a) -> Expected<jinja::Value> {
    std::tm tm{};
    if (fixed) {
      tm = *fixed;
    } else {
      std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    std::string fmt = a.get(0, "format").str();
    char buf[512];
    size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
    return jinja::Value(std::string(buf, n));
  });
}

// Nesting depth of a JSON value (iterative: the input may be hostile).
size_t json_depth(const nlohmann::ordered_json& root) {
  size_t max_depth = 0;
  std::vector<std::pair<const nlohmann::ordered_json*, size_t>> stack{{&root, 1}};
  while (!stack.empty()) {
    auto [j, d] = stack.back();
    stack.pop_back();
    max_depth = std::max(max_depth, d);
    if (j->is_structured())
      for (const auto& child : *j) stack.emplace_back(&child, d + 1);
  }
  return max_depth;
}
constexpr size_t kMaxInputDepth = 128;

}  // namespace

Expected<ChatTemplate> ChatTemplate::parse(const std::string& source, std::string bos_token,
                                           std::string eos_token) {
  auto tpl = jinja::parse_template(source, jinja::LexOptions{});
  if (!tpl.ok()) return tpl.status().with_context("chat template");
  ChatTemplate t;
  t.tpl_ = std::move(tpl).value();
  t.source_ = source;
  t.bos_ = std::move(bos_token);
  t.eos_ = std::move(eos_token);
  return t;
}

Expected<ChatTemplate> ChatTemplate::from_tokenizer_config(
    const std::string& path, const std::string& name, const std::optional<std::string>& source_override) {
  auto text = read_text_file(path);
  if (!text.ok()) return text.status();
  nlohmann::ordered_json cfg;
  try {
    cfg = nlohmann::ordered_json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(path + ": " + e.what());
  }
  if (!cfg.is_object()) return invalid_argument(path + ": not a JSON object");
  if (!source_override && !cfg.contains("chat_template")) return not_found(path + ": no \"chat_template\"");
  std::string source;
  const auto& ct = source_override ? nlohmann::ordered_json(*source_override) : cfg["chat_template"];
  if (ct.is_string()) {
    source = ct.get<std::string>();
  } else if (ct.is_array()) {
    std::string want = name.empty() ? "default" : name;
    for (const auto& e : ct)
      if (e.is_object() && e.value("name", "") == want && e.contains("template") && e["template"].is_string())
        source = e["template"].get<std::string>();
    if (source.empty()) return not_found(path + ": chat_template has no template named '" + want + "'");
  } else {
    return invalid_argument(path + ": chat_template: expected a string or a list of {name, template}");
  }
  auto t = parse(source, cfg.contains("bos_token") ? token_text(cfg["bos_token"]) : "",
                 cfg.contains("eos_token") ? token_text(cfg["eos_token"]) : "");
  if (!t.ok()) return t.status().with_context(path);
  t->bos_defined_ = cfg.contains("bos_token") && !cfg["bos_token"].is_null();
  t->eos_defined_ = cfg.contains("eos_token") && !cfg["eos_token"].is_null();
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const std::string& key = it.key();
    bool is_token = key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0;
    if (is_token && key != "bos_token" && key != "eos_token" && !it.value().is_null())
      t->special_tokens_[key] = token_text(it.value());
    if (key == "additional_special_tokens" && it.value().is_array()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const auto& e : it.value()) list.push_back(token_text(e));
      t->special_tokens_[key] = list;
    }
  }
  return t;
}

Expected<std::string> ChatTemplate::render(const ChatRenderInput& input) const {
  for (const auto* j : {&input.messages, &input.tools, &input.extra})
    if (json_depth(*j) > kMaxInputDepth)
      return invalid_argument("chat template input nested deeper than " + std::to_string(kMaxInputDepth) +
                              " levels");
  jinja::Object globals;
  globals.set("messages", jinja::Value::from_json(input.messages));
  if (!input.tools.is_null()) globals.set("tools", jinja::Value::from_json(input.tools));
  globals.set("add_generation_prompt", jinja::Value(input.add_generation_prompt));
  for (auto it = special_tokens_.begin(); it != special_tokens_.end(); ++it)
    globals.set(it.key(), jinja::Value::from_json(it.value()));
  if (bos_defined_) globals.set("bos_token", jinja::Value(bos_));
  if (eos_defined_) globals.set("eos_token", jinja::Value(eos_));
  globals.set("raise_exception", jinja::Value::callable([](jinja::Args& a) -> Expected<jinja::Value> {
                return invalid_argument("template raised an exception: " + a.get(0, "message").str());
              }));
  globals.set("strftime_now", strftime_function(input.now));
  if (input.extra.is_object())
    for (auto it = input.extra.begin(); it != input.extra.end(); ++it)
      globals.set(it.key(), jinja::Value::from_json(it.value()));
  auto out = jinja::render(*tpl_, globals);
  if (!out.ok()) return out.status().with_context("chat template");
  return out;
}

}  // namespace tandem::tok
