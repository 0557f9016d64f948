// logit_bias in every form the routes take, through HTTP on the bundled target (served_fixture.h):
// OpenAI's {"id": bias} on all three routes, llama-server's [[id or "text", bias or false]] on
// /completion, false (never produced) everywhere; and the 400s for what is not one of those.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "served_fixture.h"
#include "server/llama_api.h"

namespace tandem::server {
namespace {

using nlohmann::json;

// The tokenizer's ids for `text` without special tokens (GET /tokenize's add_special: false default).
std::vector<int32_t> token_ids(const Service& service, const std::string& text) {
  return json::parse(llama_tokenize(service, json{{"content", text}}.dump()).body)["tokens"];
}

// The ids /completion generated, from its completion_probabilities (n_probs >= 1).
std::vector<int32_t> generated_ids(const json& reply) {
  std::vector<int32_t> ids;
  for (const json& p : reply["completion_probabilities"]) ids.push_back(p["id"]);
  return ids;
}

// logit_bias keys are token ids written in decimal (OpenAI's API). std::stoll read " 1", "+1", "01"
// and "1 " as token 1, so a typo biased a token silently (and two spellings biased it twice). Each is
// now a 400 naming logit_bias and the key, on all three routes that take it, as is a token outside
// the vocabulary (8192 here); canonical keys and llama-server's [[id, bias]] form still bias.
TEST_F(ServedRoutesTest, LogitBiasKeysMustBeDecimalTokenIds) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  auto post = [&client](const char* path, const nlohmann::json& body) {
    return post_json(client, path, body);
  };
  const std::pair<const char*, nlohmann::json> routes[] = {
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}, {"temperature", 0}}},
      {"/v1/completions", {{"prompt", "Call me"}, {"max_tokens", 1}, {"temperature", 0}}},
      {"/completion", {{"prompt", "Call me"}, {"n_predict", 1}, {"temperature", 0}}},
  };
  const std::string bad_keys[] = {" 1", "+1",  "01",       "1 ",   "-1",         "1.0",        "1e3",
                                  "",   "0x1", "\xD9\xA1", "8192", "2147483648", "99999999999"};
  const int32_t forced = 300;
  const std::string forced_text = nlohmann::json::parse(
      llama_detokenize(*service_, nlohmann::json{{"tokens", {forced}}}.dump()).body)["content"];
  for (const auto& [path, base] : routes) {
    for (const std::string& key : bad_keys) {
      nlohmann::json body = base;
      body["logit_bias"] = {{key, 5}};
      const auto [status, reply] = post(path, body);
      EXPECT_EQ(status, 400) << path << " key '" << key << "': " << reply;
      ASSERT_TRUE(reply.contains("error")) << path << ": " << reply;
      EXPECT_EQ(reply["error"]["type"], "invalid_request_error") << path;
      EXPECT_EQ(reply["error"]["param"], "logit_bias") << path << " key '" << key << "'";
      EXPECT_NE(reply["error"]["message"].get<std::string>().find(key.empty() ? "''" : key),
                std::string::npos)
          << path << ": " << reply["error"]["message"];
    }
    // A canonical key biases its token: +100 makes it the greedy choice.
    nlohmann::json body = base;
    body["logit_bias"] = {{"0", -1}, {std::to_string(forced), 100}};
    const auto [status, reply] = post(path, body);
    ASSERT_EQ(status, 200) << path << ": " << reply;
    const nlohmann::json text = std::string(path) == "/v1/chat/completions"
                                    ? reply["choices"][0]["message"]["content"]
                                : std::string(path) == "/completion" ? reply["content"]
                                                                     : reply["choices"][0]["text"];
    EXPECT_EQ(text, forced_text) << path << ": " << reply;
  }
  // llama-server's array form: biases as the object does; its ids are checked the same way.
  const auto [status, reply] =
      post("/completion",
           {{"prompt", "Call me"}, {"n_predict", 1}, {"temperature", 0}, {"logit_bias", {{forced, 100}}}});
  ASSERT_EQ(status, 200) << reply;
  EXPECT_EQ(reply["content"], forced_text);
  for (const nlohmann::json& id :
       {nlohmann::json(-1), nlohmann::json(8192), nlohmann::json(18446744073709551615ull)}) {
    const auto [bad_status, bad_reply] =
        post("/completion", {{"prompt", "Call me"}, {"n_predict", 1}, {"logit_bias", {{id, 1}}}});
    EXPECT_EQ(bad_status, 400) << id;
    EXPECT_EQ(bad_reply["error"]["param"], "logit_bias") << bad_reply;
    EXPECT_NE(bad_reply["error"]["message"].get<std::string>().find(id.dump()), std::string::npos)
        << bad_reply;
  }
}

// [[id, false]] makes a token impossible: banning every token greedy decoding produced gives a
// completion that contains none of them, greedy or sampled; a +100 bias on a banned token does not
// bring it back.
TEST_F(ServedRoutesTest, FalseBiasNeverProducesTheToken) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const json base = {
      {"prompt", "It was the captain who"}, {"n_predict", 12}, {"temperature", 0}, {"n_probs", 1}};
  const auto [status, free_run] = post_json(client, "/completion", base);
  ASSERT_EQ(status, 200) << free_run;
  const std::vector<int32_t> greedy = generated_ids(free_run);
  ASSERT_EQ(greedy.size(), 12u) << free_run;
  const std::set<int32_t> banned(greedy.begin(), greedy.end());
  json pairs = json::array();
  for (int32_t id : banned) {
    pairs.push_back({id, false});
    pairs.push_back({id, 100});  // adds up: -infinity + 100 is still -infinity
  }
  for (const json& sampling : {json{{"temperature", 0}}, json{{"temperature", 1.5}, {"seed", 7}}}) {
    json body = base;
    body.update(sampling);
    body["logit_bias"] = pairs;
    const auto [s, reply] = post_json(client, "/completion", body);
    ASSERT_EQ(s, 200) << reply;
    const std::vector<int32_t> ids = generated_ids(reply);
    EXPECT_FALSE(ids.empty()) << reply;
    for (int32_t id : ids) EXPECT_EQ(banned.count(id), 0u) << sampling << " produced banned " << id << reply;
  }
}

// The OpenAI routes take {"id": false} too (llama-server does): the token greedy decoding picks
// first is then neither picked nor among the first position's alternatives.
TEST_F(ServedRoutesTest, FalseBiasOnTheOpenAiRoutes) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"max_tokens", 2},
                     {"temperature", 0},
                     {"logprobs", true},
                     {"top_logprobs", 5}};
  const json completions = {{"prompt", "Call me"}, {"max_tokens", 2}, {"temperature", 0}, {"logprobs", 5}};
  // The first token's text, and the texts of its alternatives.
  auto first = [](const json& reply, bool is_chat) {
    std::set<std::string> alternatives;
    if (is_chat) {
      const json& c = reply["choices"][0]["logprobs"]["content"][0];
      for (const json& t : c["top_logprobs"]) alternatives.insert(t["token"].get<std::string>());
      return std::make_pair(c["token"].get<std::string>(), alternatives);
    }
    const json& l = reply["choices"][0]["logprobs"];
    for (const auto& [text, logprob] : l["top_logprobs"][0].items()) alternatives.insert(text);
    return std::make_pair(l["tokens"][0].get<std::string>(), alternatives);
  };
  for (const bool is_chat : {false, true}) {
    const char* path = is_chat ? "/v1/chat/completions" : "/v1/completions";
    json body = is_chat ? chat : completions;
    const auto [s1, free_run] = post_json(client, path, body);
    ASSERT_EQ(s1, 200) << free_run;
    const std::string picked = first(free_run, is_chat).first;
    const std::vector<int32_t> ids = token_ids(*service_, picked);
    ASSERT_EQ(ids.size(), 1u) << "'" << picked << "' should be one token";
    body["logit_bias"] = {{std::to_string(ids[0]), false}};
    const auto [s2, banned_run] = post_json(client, path, body);
    ASSERT_EQ(s2, 200) << banned_run;
    const auto [now, alternatives] = first(banned_run, is_chat);
    EXPECT_NE(now, picked) << path << banned_run;
    EXPECT_EQ(alternatives.count(picked), 0u) << path << banned_run;
  }
}

// Banning every token leaves nothing to produce: a 400 before anything runs, on both forms.
TEST_F(ServedRoutesTest, BanningEveryTokenIsRefused) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const int32_t vocab = 8192;  // the bundled target's
  json pairs = json::array(), object = json::object();
  for (int32_t id = 0; id < vocab; ++id) {
    pairs.push_back({id, false});
    object[std::to_string(id)] = false;
  }
  const auto [s1, r1] =
      post_json(client, "/completion", {{"prompt", "Call me"}, {"n_predict", 2}, {"logit_bias", pairs}});
  const auto [s2, r2] = post_json(client, "/v1/completions",
                                  {{"prompt", "Call me"}, {"max_tokens", 2}, {"logit_bias", object}});
  for (const auto& [status, reply] : {std::make_pair(s1, r1), std::make_pair(s2, r2)}) {
    EXPECT_EQ(status, 400) << reply;
    EXPECT_EQ(reply["error"]["param"], "logit_bias") << reply;
    EXPECT_NE(reply["error"]["message"].get<std::string>().find("every token"), std::string::npos) << reply;
  }
  // One token left possible: that is all greedy (or anything) can produce.
  pairs.erase(pairs.begin() + 300);
  const auto [s3, r3] = post_json(
      client, "/completion",
      {{"prompt", "Call me"}, {"n_predict", 3}, {"temperature", 1}, {"n_probs", 1}, {"logit_bias", pairs}});
  ASSERT_EQ(s3, 200) << r3;
  EXPECT_EQ(generated_ids(r3), std::vector<int32_t>({300, 300, 300})) << r3;
}

// [["text", bias]] biases every token of the text as the tokenizer splits it (no special tokens):
// the same completion and probabilities as the tokenizer's ids given one by one, and not those of no
// bias; false bans each of them.
TEST_F(ServedRoutesTest, TextBiasAppliesToEveryTokenOfTheText) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const std::string text = "Hello, World!";
  const std::vector<int32_t> ids = token_ids(*service_, text);
  ASSERT_GT(ids.size(), 1u) << "the text should be several tokens";
  const json base = {{"prompt", "Call me"}, {"n_predict", 4}, {"temperature", 0}, {"n_probs", 5}};
  for (const json& bias : {json(8), json(-3.5), json(false)}) {
    json by_text = base, by_ids = base;
    by_text["logit_bias"] = json::array({json::array({text, bias})});
    by_ids["logit_bias"] = json::array();
    for (int32_t id : ids) by_ids["logit_bias"].push_back({id, bias});
    const auto [s1, r1] = post_json(client, "/completion", by_text);
    const auto [s2, r2] = post_json(client, "/completion", by_ids);
    ASSERT_EQ(s1, 200) << r1;
    ASSERT_EQ(s2, 200) << r2;
    EXPECT_EQ(r1["content"], r2["content"]) << "bias " << bias;
    EXPECT_EQ(r1["completion_probabilities"], r2["completion_probabilities"]) << "bias " << bias;
  }
  // A bias big enough to matter changes the completion (the comparison above is not vacuous).
  json boosted = base;
  boosted["logit_bias"] = json::array({json::array({text, 100})});
  const auto [s3, r3] = post_json(client, "/completion", boosted);
  const auto [s4, r4] = post_json(client, "/completion", base);
  ASSERT_EQ(s3, 200) << r3;
  EXPECT_NE(r3["completion_probabilities"], r4["completion_probabilities"]);
  EXPECT_EQ(std::set<int32_t>(ids.begin(), ids.end()).count(generated_ids(r3).at(0)), 1u) << r3;
}

// A special token's text in [["text", bias]] is text, as llama-server tokenizes it (parse_special
// false): "<|im_end|>" biases the ordinary pieces that spell it, never the special token itself.
// Before, it mapped to the special token: banning the text banned <|im_end|> (id 2).
TEST_F(ServedRoutesTest, TextBiasOnASpecialTokensTextLeavesTheSpecialTokenAlone) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const tok::Tokenizer& tokenizer = *service_->served().tokenizer;
  const std::string text = "<|im_end|>";
  const std::optional<int32_t> special = tokenizer.token_to_id(text);
  ASSERT_TRUE(special && tokenizer.is_special(*special)) << "the bundled tokenizer's end-of-turn token";
  const std::vector<int32_t> pieces = tokenizer.encode_special_as_text(text);
  ASSERT_GT(pieces.size(), 1u);
  ASSERT_EQ(std::count(pieces.begin(), pieces.end(), *special), 0);
  const json base = {{"prompt", "Call me"}, {"n_predict", 3}, {"temperature", 0}, {"n_probs", 1}};
  // The special token (an end-of-sequence id of this model) forced with +100 ends the completion at
  // once; banning the text as well changes nothing: the special token is still produced.
  json forced = base, forced_and_banned = base;
  forced["logit_bias"] = json::array({json::array({*special, 100})});
  forced_and_banned["logit_bias"] = json::array({json::array({*special, 100}), json::array({text, false})});
  const auto [s0, r0] = post_json(client, "/completion", forced);
  const auto [s1, r1] = post_json(client, "/completion", forced_and_banned);
  ASSERT_EQ(s0, 200) << r0;
  ASSERT_EQ(s1, 200) << r1;
  EXPECT_EQ(r0["stop_type"], "eos") << r0;
  for (const char* key : {"content", "stop_type", "tokens_predicted"})
    EXPECT_EQ(r1[key], r0[key]) << key << r1;
  // The text boosted: the completion is the one the pieces' ids give (a piece the text holds twice, "|",
  // gets the bias twice, as in llama-server), a piece, never the special token.
  json by_text = base, by_ids = base;
  by_text["logit_bias"] = json::array({json::array({text, 100})});
  by_ids["logit_bias"] = json::array();
  for (int32_t id : pieces) by_ids["logit_bias"].push_back({id, 100});
  const auto [s2, r2] = post_json(client, "/completion", by_text);
  const auto [s3, r3] = post_json(client, "/completion", by_ids);
  ASSERT_EQ(s2, 200) << r2;
  ASSERT_EQ(s3, 200) << r3;
  EXPECT_EQ(r2["completion_probabilities"], r3["completion_probabilities"]);
  for (int32_t id : generated_ids(r2)) {
    EXPECT_NE(id, *special) << r2;
    EXPECT_GE(std::count(pieces.begin(), pieces.end(), id), 1) << id << " is not a piece of " << text;
  }
}

// What is not a logit_bias entry is a 400 naming logit_bias and the entry, not a skipped entry
// (llama-server skips them silently) nor a bias nobody asked for.
TEST_F(ServedRoutesTest, MalformedLogitBiasEntriesAreRefused) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const std::pair<json, const char*> bad_pairs[] = {
      {json::array({json::array({5, true})}), "'logit_bias[0]' bias"},
      {json::array({json::array({5, "1"})}), "'logit_bias[0]' bias"},
      {json::array({json::array({5, nullptr})}), "'logit_bias[0]' bias"},
      {json::array({json::array({5, 1e39})}), "'logit_bias[0]' bias"},
      {json::array({json::array({5, -1e39})}), "'logit_bias[0]' bias"},
      {json::array({json::array({5, 101})}), "token 5"},
      {json::array({json::array({5, 1}), json::array({"", 1})}), "'logit_bias[1]' text is empty"},
      {json::array({json::array({5})}), "'logit_bias[0]' must be a pair"},
      {json::array({json::array({5, 1, 2})}), "'logit_bias[0]' must be a pair"},
      {json::array({5}), "'logit_bias[0]' must be a pair"},
      {json::array({json::array({1.5, 1})}), "'logit_bias[0]' token 1.5"},
      {json::array({json::array({json::object(), 1})}), "'logit_bias[0]' token {}"},
      {json::array({json::array({true, 1})}), "'logit_bias[0]' token true"},
  };
  for (const auto& [logit_bias, named] : bad_pairs) {
    const auto [status, reply] = post_json(
        client, "/completion", {{"prompt", "Call me"}, {"n_predict", 1}, {"logit_bias", logit_bias}});
    EXPECT_EQ(status, 400) << logit_bias << ": " << reply;
    ASSERT_TRUE(reply.contains("error")) << reply;
    EXPECT_EQ(reply["error"]["param"], "logit_bias") << reply;
    EXPECT_NE(reply["error"]["message"].get<std::string>().find(named), std::string::npos)
        << reply["error"]["message"] << " should name " << named;
  }
  // The object form's values on the OpenAI routes: numbers or false, nothing else.
  for (const json& value : {json(true), json("1"), json(1e39), json(-1e39), json::array()}) {
    const auto [status, reply] =
        post_json(client, "/v1/completions",
                  {{"prompt", "Call me"}, {"max_tokens", 1}, {"logit_bias", {{"5", value}}}});
    EXPECT_EQ(status, 400) << value << ": " << reply;
    EXPECT_EQ(reply["error"]["param"], "logit_bias") << reply;
    EXPECT_NE(reply["error"]["message"].get<std::string>().find("token 5"), std::string::npos) << reply;
  }
}

// ignore_eos: an end-of-sequence token forced with +100 ends every route's reply at once; with
// ignore_eos the OpenAI routes (vLLM's meaning) run on to max_tokens, the token sampled like any
// other, and /completion (llama-server's meaning) never samples it and runs to n_predict.
TEST_F(ServedRoutesTest, IgnoreEosRunsToTheLimit) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  const std::optional<int32_t> eos = service_->served().tokenizer->token_to_id("<|im_end|>");
  ASSERT_TRUE(eos.has_value());
  const json force = {{std::to_string(*eos), 100}};
  const json completions = {
      {"prompt", "Call me"}, {"max_tokens", 5}, {"temperature", 0}, {"logit_bias", force}};
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"max_tokens", 4},
                     {"temperature", 0},
                     {"logit_bias", force}};
  for (const auto& [path, body, limit] :
       {std::tuple{"/v1/completions", completions, 5}, std::tuple{"/v1/chat/completions", chat, 4}}) {
    const auto [s0, stopped] = post_json(client, path, body);
    ASSERT_EQ(s0, 200) << stopped;
    EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop") << stopped;
    json ignoring = body;
    ignoring["ignore_eos"] = true;
    const auto [s1, ran] = post_json(client, path, ignoring);
    ASSERT_EQ(s1, 200) << ran;
    EXPECT_EQ(ran["choices"][0]["finish_reason"], "length") << ran;
    EXPECT_EQ(ran["usage"]["completion_tokens"], limit) << ran;
  }
  json llama = {{"prompt", "Call me"},
                {"n_predict", 5},
                {"temperature", 0},
                {"n_probs", 1},
                {"logit_bias", json::array({json::array({*eos, 100})})}};
  const auto [s2, stopped] = post_json(client, "/completion", llama);
  ASSERT_EQ(s2, 200) << stopped;
  EXPECT_EQ(stopped["stop_type"], "eos") << stopped;
  llama["ignore_eos"] = true;
  const auto [s3, ran] = post_json(client, "/completion", llama);
  ASSERT_EQ(s3, 200) << ran;
  EXPECT_EQ(ran["stop_type"], "limit") << ran;
  const std::vector<int32_t> ids = generated_ids(ran);
  EXPECT_EQ(ids.size(), 5u) << ran;
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *eos), 0) << ran;
}

}  // namespace
}  // namespace tandem::server
