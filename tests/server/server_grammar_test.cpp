// The server-wide grammar (tandem serve --grammar / --grammar-file / -j / -jf; RequestDefaults::
// grammar): every completion or chat request without a constraint of its own follows it, on every
// generation route; a request's own grammar, json_schema or response_format wins, and
// `"grammar": ""` declines it (llama-server's precedence, docs/grammar.md). Through HTTP on the
// bundled target, with a Service of its own (the shared fixture's has no server grammar).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"
#include "runtime/opened_model.h"
#include "served_fixture.h"
#include "server/structured_request.h"

namespace tandem::server {
namespace {

using nlohmann::json;

const char* const kServerGrammar = R"(root ::= "yes" | "no")";
constexpr uint64_t kServerSeed = 4242;

class ServerGrammarTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto grammar = grammar::parse_gbnf(kServerGrammar);
    ASSERT_TRUE(grammar.ok()) << grammar.status().to_string();
    RequestDefaults defaults;
    defaults.grammar = std::make_shared<const grammar::Grammar>(std::move(*grammar));
    defaults.grammar_gbnf = kServerGrammar;
    defaults.sampling.top_k = 5;  // a server default /props shows (the requests here set temperature)
    defaults.seed = kServerSeed;  // --seed: /props reports it
    serve_bundled_target(&service_, 128, 2, std::move(defaults));
  }
  static void TearDownTestSuite() {
    delete service_;
    service_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(service_, nullptr) << "the bundled target did not load"; }

  inline static Service* service_ = nullptr;
};

// The generated text of a reply from /v1/chat/completions, /v1/completions or /completion.
std::string text_of(const std::string& path, const json& reply) {
  if (path == "/v1/chat/completions") return reply["choices"][0]["message"]["content"];
  if (path == "/completion") return reply["content"];
  return reply["choices"][0]["text"];
}

const std::pair<std::string, json> kRoutes[] = {
    {"/v1/chat/completions",
     {{"messages", {{{"role", "user"}, {"content", "Is the whale white?"}}}}, {"max_tokens", 12}}},
    {"/v1/completions", {{"prompt", "Call me Ishmael. Is the whale white?"}, {"max_tokens", 12}}},
    {"/completion", {{"prompt", "Call me Ishmael. Is the whale white?"}, {"n_predict", 12}}},
};

TEST_F(ServerGrammarTest, ARequestWithoutItsOwnGrammarFollowsTheServers) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  for (const auto& [path, base] : kRoutes) {
    for (const json& sampling : {json{{"temperature", 0}}, json{{"temperature", 1.2}, {"seed", 5}}}) {
      json body = base;
      body.update(sampling);
      // response_format text constrains nothing: the server's grammar still applies.
      if (path != "/completion") body["response_format"] = {{"type", "text"}};
      const auto [status, reply] = post_json(client, path.c_str(), body);
      ASSERT_EQ(status, 200) << path << ": " << reply;
      const std::string text = text_of(path, reply);
      EXPECT_TRUE(text == "yes" || text == "no") << path << " " << sampling << ": '" << text << "'";
    }
  }
}

TEST_F(ServerGrammarTest, ARequestsOwnConstraintWinsAndAnEmptyGrammarDeclinesIt) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  for (const auto& [path, base] : kRoutes) {
    json body = base;
    body["temperature"] = 0;
    body["grammar"] = R"(root ::= "maybe")";
    auto [status, reply] = post_json(client, path.c_str(), body);
    ASSERT_EQ(status, 200) << path << ": " << reply;
    EXPECT_EQ(text_of(path, reply), "maybe") << path;

    body = base;
    body["temperature"] = 0;
    body["json_schema"] = {{"enum", {"left", "right"}}};
    std::tie(status, reply) = post_json(client, path.c_str(), body);
    ASSERT_EQ(status, 200) << path << ": " << reply;
    const std::string chosen = text_of(path, reply);
    EXPECT_TRUE(chosen == "\"left\"" || chosen == "\"right\"") << path << ": '" << chosen << "'";

    if (path != "/completion") {
      body = base;
      body["temperature"] = 0;
      body["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"name", "n"}, {"schema", {{"enum", {"up", "down"}}}}}}};
      std::tie(status, reply) = post_json(client, path.c_str(), body);
      ASSERT_EQ(status, 200) << path << ": " << reply;
      const std::string direction = text_of(path, reply);
      EXPECT_TRUE(direction == "\"up\"" || direction == "\"down\"") << path << ": '" << direction << "'";
    }

    // "grammar": "" asks for no grammar at all: the model's own prose, to max_tokens.
    body = base;
    body["temperature"] = 0;
    body["grammar"] = "";
    std::tie(status, reply) = post_json(client, path.c_str(), body);
    ASSERT_EQ(status, 200) << path << ": " << reply;
    const std::string free_text = text_of(path, reply);
    EXPECT_NE(free_text, "yes") << path;
    EXPECT_NE(free_text, "no") << path;
    EXPECT_GT(free_text.size(), 8u) << path << ": '" << free_text << "'";
  }
}

// GET /props reports the server's defaults where llama-server does,
// default_generation_settings.params: the grammar's GBNF ("" when there is none), the sampling.
json props_params(int port) {
  httplib::Client client("127.0.0.1", port);
  auto reply = client.Get("/props");
  if (!reply || reply->status != 200) return nullptr;
  return json::parse(reply->body)["default_generation_settings"]["params"];
}

TEST_F(ServerGrammarTest, PropsReportsTheServersGrammar) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  const json params = props_params(server.port());
  EXPECT_EQ(params["grammar"], kServerGrammar) << params;
  EXPECT_EQ(params["top_k"], 5) << params;
}

TEST_F(ServedRoutesTest, PropsReportsAnEmptyGrammarWithoutOne) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  EXPECT_EQ(props_params(server.port())["grammar"], "");
}

// --seed N: /props reports N, as llama-server reports the seed it was given.
TEST_F(ServerGrammarTest, PropsReportsTheServersSeed) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  EXPECT_EQ(props_params(server.port())["seed"], kServerSeed);
}

// No --seed: -1, a random seed per request.
TEST_F(ServedRoutesTest, PropsReportsSeedMinusOneWithoutOne) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  EXPECT_EQ(props_params(server.port())["seed"], -1);
}

// The precedence rule alone (structured_request.h).
TEST(ApplyServerGrammar, OnlyARequestWithoutAConstraintTakesIt) {
  auto server = std::make_shared<const grammar::Grammar>(*grammar::parse_gbnf(kServerGrammar));
  StructuredRequest plain;
  apply_server_grammar(server, plain);
  EXPECT_EQ(plain.grammar, server);
  EXPECT_EQ(plain.grammar_source, "server");

  StructuredRequest own;
  ASSERT_FALSE(parse_structured(nlohmann::ordered_json{{"grammar", R"(root ::= "a")"}}, false, own));
  apply_server_grammar(server, own);
  EXPECT_NE(own.grammar, server);
  EXPECT_EQ(own.grammar_source, "grammar");

  StructuredRequest declined;
  ASSERT_FALSE(parse_structured(nlohmann::ordered_json{{"grammar", ""}}, false, declined));
  apply_server_grammar(server, declined);
  EXPECT_EQ(declined.grammar, nullptr);

  // Tools are the request's constraint through the grammar they build (required, named, auto in
  // the Hermes and Mistral syntaxes); auto in the Llama 3 syntax builds none, so the server's
  // grammar applies there (llama-server: the template's grammar, else the server's), and the
  // output is still parsed for calls. tool_choice none builds none either.
  struct Case {
    const char* tool_choice;
    grammar::ToolCallFormat format;
    const char* source;  // grammar_source after both steps
  };
  for (const Case& c : {Case{"auto", grammar::ToolCallFormat::hermes, "tools"},
                        Case{"auto", grammar::ToolCallFormat::mistral, "tools"},
                        Case{"auto", grammar::ToolCallFormat::llama3, "server"},
                        Case{"required", grammar::ToolCallFormat::llama3, "tool_choice"},
                        Case{"required", grammar::ToolCallFormat::hermes, "tool_choice"},
                        Case{"none", grammar::ToolCallFormat::hermes, "server"}}) {
    const std::string where =
        std::string(c.tool_choice) + " in syntax " + std::to_string(static_cast<int>(c.format));
    StructuredRequest tools;
    auto body = nlohmann::ordered_json::parse(
        R"({"messages": [], "tools": [{"type": "function", "function": {"name": "f"}}]})");
    body["tool_choice"] = c.tool_choice;
    ASSERT_FALSE(parse_structured(body, true, tools)) << where;
    ASSERT_FALSE(finish_tool_grammar(c.format, tools)) << where;
    apply_server_grammar(server, tools);
    EXPECT_EQ(tools.grammar_source, c.source) << where;
    EXPECT_EQ(tools.grammar == server, std::string(c.source) == "server") << where;
    EXPECT_EQ(tools.parses_tool_calls(), std::string(c.tool_choice) != "none") << where;
  }

  StructuredRequest none;
  apply_server_grammar(nullptr, none);
  EXPECT_EQ(none.grammar, nullptr);
}

}  // namespace
}  // namespace tandem::server
