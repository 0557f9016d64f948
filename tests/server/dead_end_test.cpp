// A request whose constraints leave no token at some position — here a JSON schema whose object is
// complete, so only the end tokens may follow, and logit_bias banning those — through HTTP on the
// bundled target (served_fixture.h). Non-streamed: a 400 in the OpenAI shape naming the cause, on
// every route that takes a grammar. Streamed: the text of the tokens before it, an error event in
// place of the finish chunk, then [DONE]. Before the change the sampler returned token 0 there and
// the reply went on, 200, with a token the request had banned.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "raw_http.h"
#include "served_fixture.h"
#include "server/generation.h"
#include "server/ollama_api.h"

namespace tandem::server {
namespace {

using nlohmann::json;

const json kSchema =
    json::parse(R"({"type": "object", "properties": {"kind": {"enum": ["sea", "ship", "whale"]}},
                                     "required": ["kind"], "additionalProperties": false})");

// {"id": false} for OpenAI's routes, [[id, false], ...] for /completion: every end token banned.
json banned_end_tokens(const Service& service, bool llama_form) {
  json bias = llama_form ? json::array() : json::object();
  for (int32_t id : service.served().stop_tokens) {
    if (llama_form) {
      bias.push_back({id, false});
    } else {
      bias[std::to_string(id)] = -100;
    }
  }
  return bias;
}

json chat_body(const Service& service, bool stream) {
  return {
      {"messages", {{{"role", "user"}, {"content", "Where is the whale?"}}}},
      {"max_tokens", 40},
      {"temperature", 0},
      {"stream", stream},
      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "k"}, {"schema", kSchema}}}}},
      {"logit_bias", banned_end_tokens(service, false)}};
}

// chat_body with the end tokens banned (false) instead of made unlikely: a dead end once the
// object is complete.
json dead_end_chat_body(const Service& service, bool stream) {
  json body = chat_body(service, stream);
  for (auto& [id, bias] : body["logit_bias"].items()) bias = false;
  return body;
}

void expect_dead_end_error(const json& error, const std::string& where) {
  EXPECT_EQ(error["type"], "invalid_request_error") << where;
  EXPECT_EQ(error["code"], "no_allowed_token") << where;
  const std::string message = error["message"];
  EXPECT_EQ(message.rfind("no token is allowed after ", 0), 0u) << where << ": " << message;
  EXPECT_NE(message.find("are all banned by logit_bias"), std::string::npos) << where << ": " << message;
  // The grammar's tokens were there; logit_bias took the last of them: that is the field named.
  EXPECT_EQ(error["param"], "logit_bias") << where;
}

TEST_F(ServedRoutesTest, ConstraintsThatLeaveNoTokenAreA400NotAWrongToken) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  // -100 is not a ban: the end tokens stay possible, and the object ends the reply.
  {
    json body = chat_body(*service_, false);
    const auto [status, reply] = post_json(client, "/v1/chat/completions", body);
    ASSERT_EQ(status, 200) << reply;
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop") << reply;
    EXPECT_EQ(json::parse(reply["choices"][0]["message"]["content"].get<std::string>())["kind"].is_string(),
              true);
  }
  const json chat = dead_end_chat_body(*service_, false);
  const auto [status, reply] = post_json(client, "/v1/chat/completions", chat);
  EXPECT_EQ(status, 400) << reply;
  ASSERT_TRUE(reply.contains("error")) << reply;
  expect_dead_end_error(reply["error"], "/v1/chat/completions");

  json completion = {
      {"prompt", "The whale is"},
      {"max_tokens", 40},
      {"temperature", 0.7},
      {"seed", 5},
      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "k"}, {"schema", kSchema}}}}},
      {"logit_bias", chat["logit_bias"]}};
  const auto [status2, reply2] = post_json(client, "/v1/completions", completion);
  EXPECT_EQ(status2, 400) << reply2;
  if (reply2.contains("error")) expect_dead_end_error(reply2["error"], "/v1/completions");

  json llama = {{"prompt", "The whale is"},
                {"n_predict", 40},
                {"temperature", 0},
                {"json_schema", kSchema},
                {"logit_bias", banned_end_tokens(*service_, true)}};
  const auto [status3, reply3] = post_json(client, "/completion", llama);
  EXPECT_EQ(status3, 400) << reply3;
  if (reply3.contains("error")) expect_dead_end_error(reply3["error"], "/completion");
}

TEST_F(ServedRoutesTest, AStreamThatReachesNoAllowedTokenEndsWithAnErrorEvent) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  json body = dead_end_chat_body(*service_, true);
  body["stream_options"] = {{"include_usage", true}};
  const std::string text = body.dump();
  // HTTP/1.0: the payload is the events themselves, ended by the server closing the connection.
  const std::string reply =
      testing::exchange(server.port(),
                        "POST /v1/chat/completions HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: " +
                            std::to_string(text.size()) + "\r\n\r\n" + text,
                        60);
  ASSERT_EQ(testing::status_of(reply), 200) << reply;
  const std::string payload = reply.substr(reply.find("\r\n\r\n") + 4);
  std::vector<json> events;
  bool done = false;
  for (size_t at = 0; at < payload.size();) {
    const size_t end = payload.find("\n\n", at);
    ASSERT_NE(end, std::string::npos) << "unterminated event in " << payload;
    const std::string event = payload.substr(at, end - at);
    at = end + 2;
    ASSERT_EQ(event.rfind("data: ", 0), 0u) << event;
    ASSERT_FALSE(done) << "an event after [DONE]: " << payload;
    if (event == "data: [DONE]") {
      done = true;
      continue;
    }
    events.push_back(json::parse(event.substr(6)));
  }
  EXPECT_TRUE(done) << payload;
  std::string content;
  size_t errors = 0, error_at = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (e.contains("error")) {
      ++errors;
      error_at = i;
      expect_dead_end_error(e["error"], "stream");
      continue;
    }
    for (const json& choice : e["choices"]) {
      EXPECT_TRUE(choice["finish_reason"].is_null()) << "a finish chunk besides the error: " << e;
      if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
    }
  }
  ASSERT_EQ(errors, 1u) << payload;
  // The usage chunk still comes (include_usage), after the error; nothing else does.
  EXPECT_EQ(error_at + 2, events.size()) << payload;
  EXPECT_TRUE(events.back().contains("usage")) << payload;
  // What came before the error is the whole object the grammar allowed, and nothing else.
  const json object = json::parse(content, nullptr, false);
  ASSERT_FALSE(object.is_discarded()) << content;
  EXPECT_TRUE(object["kind"].is_string()) << content;
}

// n > 1 (non-streamed): one choice at a dead end fails the whole request, as with n = 1 (OpenAI
// has no per-choice error), with the same error object: the greedy choices are identical, so is
// the position and the message.
TEST_F(ServedRoutesTest, ADeadEndWithSeveralChoicesIsTheSameErrorAsWithOne) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const json chat = dead_end_chat_body(*service_, false);
  json completion = {
      {"prompt", "The whale is"},
      {"max_tokens", 40},
      {"temperature", 0},
      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "k"}, {"schema", kSchema}}}}},
      {"logit_bias", chat["logit_bias"]}};
  for (const auto& [path, base] : {std::pair<const char*, json>{"/v1/chat/completions", chat},
                                   std::pair<const char*, json>{"/v1/completions", completion}}) {
    json one = base, two = base;
    one["n"] = 1;
    two["n"] = 2;
    const auto [status1, reply1] = post_json(client, path, one);
    const auto [status2, reply2] = post_json(client, path, two);
    ASSERT_EQ(status1, 400) << path << ": " << reply1;
    ASSERT_EQ(status2, 400) << path << ": " << reply2;
    expect_dead_end_error(reply2["error"], std::string(path) + " n=2");
    EXPECT_EQ(reply1, reply2) << path;
  }
}

// sampling::no_allowed_token's Status for a grammar that allows no token.
Status grammar_dead_end() {
  return invalid_argument(
      "no token is allowed after 3 generated tokens: the grammar (grammar, json_schema or response_format) "
      "allows no token here");
}

// The field a dead end names, for each place a grammar comes from (the server's own grammar is no
// field of the request: none), from the reasons sampling::no_allowed_token gives.
TEST(DeadEndParam, NamesTheFieldWhoseConstraintLeftNoToken) {
  const Status grammar_none = grammar_dead_end();
  const Status banned = invalid_argument(
      "no token is allowed after 3 generated tokens: the grammar's next tokens 2, 3 are all banned by "
      "logit_bias");
  StructuredRequest structured;
  for (const char* source : {"grammar", "json_schema", "response_format", "format", "tools", "tool_choice"}) {
    structured.grammar_source = source;
    EXPECT_EQ(dead_end_param(grammar_none, structured), std::optional<std::string>(source));
    EXPECT_EQ(dead_end_param(banned, structured), std::optional<std::string>("logit_bias"));
  }
  structured.grammar_source = "server";
  EXPECT_EQ(dead_end_param(grammar_none, structured), std::nullopt);
  EXPECT_EQ(
      dead_end_param(internal_error("no token is allowed after 3 generated tokens: the model's logits are "
                                    "NaN or -infinity for every token"),
                     structured),
      std::nullopt);
  // The same error shape through generation_error: 400 no_allowed_token naming it; 500 naming nothing.
  const ApiError e = generation_error(banned, dead_end_param(banned, structured));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.code, "no_allowed_token");
  EXPECT_EQ(e.param, std::optional<std::string>("logit_bias"));
  EXPECT_EQ(generation_error(internal_error("x"), std::string("grammar")).param, std::nullopt);
}

// Ollama's routes (/api/generate, /api/chat): the same 400, in Ollama's {"error": "message"} body,
// whose message names the field (Ollama's body has no `param`): `format` for the grammar it gave.
TEST(DeadEndParam, OllamasErrorNamesTheFieldInItsMessage) {
  const Status grammar_none = grammar_dead_end();
  StructuredRequest structured;
  structured.grammar_source = "format";
  const HttpReply reply =
      ollama_error(generation_error(grammar_none, dead_end_param(grammar_none, structured)));
  EXPECT_EQ(reply.status, 400);
  const json body = json::parse(reply.body);
  ASSERT_EQ(body.size(), 1u) << reply.body;
  const std::string message = body["error"];
  EXPECT_EQ(message.rfind(grammar_none.message(), 0), 0u) << message;
  EXPECT_NE(message.find("(param: format)"), std::string::npos) << message;
  // The server's own grammar is no field of the request: the message alone.
  structured.grammar_source = "server";
  EXPECT_EQ(json::parse(
                ollama_error(generation_error(grammar_none, dead_end_param(grammar_none, structured))).body),
            json({{"error", grammar_none.message()}}));
}

}  // namespace
}  // namespace tandem::server
