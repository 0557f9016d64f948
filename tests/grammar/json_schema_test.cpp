// JSON Schema -> grammar, on the cases of schema_cases.json (whose verdicts
// check_schema_cases.py confirms with Python jsonschema).
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace tandem::grammar {
namespace {

using nlohmann::ordered_json;
using testing::compile;
using testing::verdict;

ordered_json load_cases() {
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  std::ifstream in(std::string(src ? src : ".") + "/tests/grammar/schema_cases.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

TEST(JsonSchema, CasesAcceptExactlyTheValidStrings) {
  const ordered_json cases = load_cases();
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto text = json_schema_to_gbnf(c["schema"]);
    ASSERT_TRUE(text.ok()) << text.status().message();
    auto g = compile(*text);
    ASSERT_NE(g, nullptr) << *text;
    for (const auto& v : c["valid"]) EXPECT_EQ(verdict(g, v.get<std::string>()), 'a') << v;
    for (const auto& v : c["invalid"]) EXPECT_NE(verdict(g, v.get<std::string>()), 'a') << v;
    for (const auto& v : c["outside_grammar"]) EXPECT_NE(verdict(g, v.get<std::string>()), 'a') << v;
  }
}

TEST(JsonSchema, JsonObjectAcceptsObjectsOnly) {
  auto g = compile(json_object_gbnf());
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, R"({"a":{"b":[1,2.5,-3e2,"x",true,false,null]}})"), 'a');
  EXPECT_EQ(verdict(g, "{}"), 'a');
  EXPECT_EQ(verdict(g, R"({"a":)"), 'p');
  EXPECT_EQ(verdict(g, "[1]"), 'x');
  EXPECT_EQ(verdict(g, R"({"a":tru})"), 'x');
  EXPECT_EQ(verdict(g, "{\"a\":\"\x01\"}"), 'x');  // control characters must be escaped
  EXPECT_EQ(verdict(g, R"({"a":"\q"})"), 'x');
}

TEST(JsonSchema, WhitespaceAndNumbersAreBounded) {
  auto g = compile(json_object_gbnf());
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(verdict(g, "{\n" + std::string(20, ' ') + "\"a\":1}"), 'a');
  EXPECT_EQ(verdict(g, "{\n" + std::string(21, ' ') + "\"a\":1}"), 'x');
  EXPECT_EQ(verdict(g, "{\"a\":" + std::string(16, '9') + "}"), 'a');
  EXPECT_EQ(verdict(g, "{\"a\":" + std::string(17, '9') + "}"), 'x');
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  auto e = json_schema_to_gbnf(
      ordered_json::parse(R"({"type":"object","properties":{"zip":{"type":"array","uniqueItems":true}}})"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'uniqueItems'"), std::string::npos) << e.status().message();
  EXPECT_FALSE(
      json_schema_to_gbnf(ordered_json::parse(R"({"type":"string","pattern":"^a+$","maxLength":3})")).ok());
  auto look = json_schema_to_gbnf(ordered_json::parse(R"({"type":"string","pattern":"^(?=a)b$"})"));
  ASSERT_FALSE(look.ok());
  EXPECT_NE(look.status().message().find("lookaround"), std::string::npos) << look.status().message();
  EXPECT_NE(e.status().message().find("#/properties/zip"), std::string::npos) << e.status().message();
  auto f = json_schema_to_gbnf(ordered_json::parse(R"({"type":"string","format":"ipv6"})"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("ipv6"), std::string::npos);
  EXPECT_FALSE(json_schema_to_gbnf(ordered_json::parse(R"({"$ref":"#/$defs/missing"})")).ok());
  auto range = json_schema_to_gbnf(ordered_json::parse(R"({"type":"integer","minimum":5000})"));
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("'minimum'"), std::string::npos);
  EXPECT_FALSE(json_schema_to_gbnf(ordered_json::parse(R"({"type":"number","maximum":1.5})")).ok());
  EXPECT_FALSE(json_schema_to_gbnf(ordered_json::parse(R"({"type":"strange"})")).ok());
  EXPECT_FALSE(json_schema_to_gbnf(ordered_json::parse("false")).ok());
  EXPECT_TRUE(
      json_schema_to_gbnf(ordered_json::parse(R"({"title":"T","description":"d","type":"string"})")).ok());
}

}  // namespace
}  // namespace tandem::grammar
