// The pure parts of the compatibility routes: llama-server's /completion body,
// Ollama's /api/generate and /api/chat bodies, the CORS origin list, base64
// (RFC 4648's test vectors), UTF-8 checks of token pieces, the slot board, and
// how a request's model name is matched (--model-match).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "grammar/automaton.h"
#include "server/compat_routes.h"
#include "server/embeddings_api.h"
#include "server/llama_api.h"
#include "server/ollama_api.h"
#include "server/slot_board.h"

namespace tandem::server {
namespace {

template <typename T>
T ok(std::variant<T, ApiError> r) {
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::holds_alternative<T>(r) ? std::get<T>(r) : T{};
}

template <typename T>
ApiError err(std::variant<T, ApiError> r) {
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << "expected an error";
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(LlamaCompletion, ReadsLlamaServerSpellings) {
  GenerationRequest r = ok(parse_llama_completion(R"({"prompt": "hi", "n_predict": 7, "temperature": 0.5,
      "top_k": 40, "top_p": 0.9, "min_p": 0.05, "repeat_penalty": 1.1, "seed": 3, "stop": ["\n"],
      "stream": true, "cache_prompt": true, "logit_bias": [[5, -2.0]], "some_future_field": {"x": 1}})"));
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.seed, 3u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.stream);
  ASSERT_EQ(r.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.sampling.logit_bias[0].first, 5);
  EXPECT_FLOAT_EQ(r.sampling.logit_bias[0].second, -2.0f);
}

// llama-server's other logit_bias forms: false bans the token (-infinity), a text entry waits for
// the tokenizer, repeated entries stay separate (they add up in the sampler, as in llama-server);
// the OpenAI routes' object form takes false too.
TEST(LlamaCompletion, LogitBiasFalseAndTextEntries) {
  constexpr float kBan = -std::numeric_limits<float>::infinity();
  GenerationRequest r = ok(parse_llama_completion(
      R"({"prompt": "x", "logit_bias": [[5, false], ["Hello, World!", -0.5], [5, 2], ["hi", false]]})"));
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampling.logit_bias[0], std::make_pair(5, kBan));
  EXPECT_EQ(r.sampling.logit_bias[1], std::make_pair(5, 2.0f));
  ASSERT_EQ(r.text_logit_bias.size(), 2u);
  EXPECT_EQ(r.text_logit_bias[0].text, "Hello, World!");
  EXPECT_FLOAT_EQ(r.text_logit_bias[0].bias, -0.5f);
  EXPECT_EQ(r.text_logit_bias[0].entry, "'logit_bias[1]'");
  EXPECT_EQ(r.text_logit_bias[1].bias, kBan);
  r = ok(parse_llama_completion(R"({"prompt": "x", "logit_bias": {"7": false}})"));
  EXPECT_EQ(r.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, kBan}}));
  auto openai =
      parse_generation_request(Endpoint::completions, R"({"prompt": "x", "logit_bias": {"7": false}})");
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(openai));
  EXPECT_EQ(std::get<GenerationRequest>(openai).sampling.logit_bias[0].second, kBan);
  for (const char* body :
       {R"({"prompt": "x", "logit_bias": [[5, true]]})", R"({"prompt": "x", "logit_bias": [["", 1]]})",
        R"({"prompt": "x", "logit_bias": [[5, -1e39]]})", R"({"prompt": "x", "logit_bias": {"5": true}})",
        R"({"prompt": "x", "logit_bias": {"Hello": 1}})"}) {
    ApiError e = err(parse_llama_completion(body));
    EXPECT_EQ(e.param, "logit_bias") << body;
  }
}

TEST(LlamaCompletion, MinusOneMeansRandomSeedAndNoLimit) {
  GenerationRequest r = ok(parse_llama_completion(R"({"prompt": [1, 2, 3], "n_predict": -1, "seed": -1})"));
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.logprobs);
  // 2^64 - 1 is not -1 (nlohmann's == says it is): out of range, as on /v1/completions.
  auto big = parse_llama_completion(R"({"prompt": [1], "seed": 18446744073709551615})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(big));
  EXPECT_EQ(std::get<ApiError>(big).param, "seed");
  EXPECT_EQ(ok(parse_llama_completion(R"({"prompt": [1], "seed": 5})")).seed, 5u);
  r = ok(parse_llama_completion(R"({"prompt": "x", "n_probs": 4})"));
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 4);
}

TEST(LlamaCompletion, ReadsJsonSchemaAndGrammar) {
  GenerationRequest r = ok(parse_llama_completion(R"({"prompt": "x", "json_schema": {"type": "integer"}})"));
  ASSERT_NE(r.structured.grammar, nullptr);
  EXPECT_EQ(r.structured.grammar_source, "json_schema");
  r = ok(parse_llama_completion(R"({"prompt": "x", "grammar": "root ::= \"a\""})"));
  ASSERT_NE(r.structured.grammar, nullptr);
  EXPECT_EQ(r.structured.grammar_source, "grammar");
  EXPECT_EQ(ok(parse_llama_completion(R"({"prompt": "x"})")).structured.grammar, nullptr);
}

TEST(LlamaCompletion, WrongTypesNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "x", "n_predict": "4"})", "n_predict"},
      {R"({"prompt": "x", "n_predict": 0})", "n_predict"},
      {R"({"prompt": "x", "cache_prompt": 1})", "cache_prompt"},
      {R"({"prompt": "x", "n_probs": 2.5})", "n_probs"},
      {R"({"prompt": "x", "repeat_penalty": "high"})", "repeat_penalty"},
      {R"({"prompt": "x", "logit_bias": [[1]]})", "logit_bias"},
      {R"({"prompt": "x", "stream": "yes"})", "stream"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": 4})", "prompt"},
      {R"({})", "prompt"},
      {R"({"prompt": "x", "grammar": "root ::= ("})", "grammar"},
      {R"({"prompt": "x", "json_schema": 3})", "json_schema"},
  };
  for (const auto& [body, field] : cases) {
    ApiError e = err(parse_llama_completion(body));
    EXPECT_EQ(e.http_status, 400) << body;
    EXPECT_EQ(e.param, field) << body << ": " << e.message;
  }
  EXPECT_EQ(err(parse_llama_completion("[1]")).code, "invalid_json");
}

// Nesting a million deep overflowed an HTTP worker's stack when the parsed body was copied
// (openai_request_test.cpp: NestingPastTheDepthLimitIsInvalidJson); every parser refuses it.
TEST(CompatRequests, NestingPastTheDepthLimitIsInvalidJson) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  EXPECT_EQ(err(parse_llama_completion(R"({"prompt": "x", "junk": )" + deep + "}")).code, "invalid_json");
  for (OllamaEndpoint e : {OllamaEndpoint::generate, OllamaEndpoint::chat}) {
    EXPECT_EQ(err(parse_ollama_request(e, R"({"prompt": "x", "format": )" + deep + "}")).code,
              "invalid_json");
    EXPECT_EQ(
        err(parse_ollama_request(e, R"({"messages": [{"role": "user", "content": "x", "a": )" + deep + "}]}"))
            .code,
        "invalid_json");
  }
}

TEST(OllamaRequest, GenerateTemplatesThePromptUnlessRaw) {
  OllamaRequest o = ok(parse_ollama_request(OllamaEndpoint::generate, R"({"model": "m", "prompt": "hi",
      "system": "be brief", "options": {"num_predict": 5, "temperature": 0.2, "top_k": 3, "seed": 9,
      "stop": ["."], "repeat_penalty": 1.2, "num_ctx": 4096}, "keep_alive": "5m"})"));
  EXPECT_EQ(o.model, "m");
  EXPECT_FALSE(o.load_only);
  EXPECT_TRUE(o.generation.stream);  // Ollama streams unless told otherwise
  EXPECT_EQ(o.generation.endpoint, Endpoint::chat_completions);
  ASSERT_EQ(o.generation.messages.size(), 2u);
  EXPECT_EQ(o.generation.messages[0]["role"], "system");
  EXPECT_EQ(o.generation.messages[1]["content"], "hi");
  EXPECT_EQ(o.generation.max_tokens, 5);
  EXPECT_FLOAT_EQ(o.generation.sampling.temperature, 0.2f);
  EXPECT_EQ(o.generation.sampling.top_k, 3);
  EXPECT_EQ(o.generation.seed, 9u);
  EXPECT_EQ(o.generation.stop, std::vector<std::string>{"."});
  EXPECT_FLOAT_EQ(o.generation.sampling.repetition_penalty, 1.2f);

  OllamaRequest raw =
      ok(parse_ollama_request(OllamaEndpoint::generate, R"({"prompt": "hi", "raw": true, "stream": false})"));
  EXPECT_EQ(raw.generation.endpoint, Endpoint::completions);
  EXPECT_EQ(raw.generation.prompt_text, "hi");
  EXPECT_FALSE(raw.generation.stream);
}

TEST(OllamaRequest, EmptyPromptOrMessagesOnlyLoads) {
  EXPECT_TRUE(ok(parse_ollama_request(OllamaEndpoint::generate, R"({"model": "m"})")).load_only);
  EXPECT_TRUE(ok(parse_ollama_request(OllamaEndpoint::chat, R"({"model": "m", "messages": []})")).load_only);
  OllamaRequest chat = ok(parse_ollama_request(
      OllamaEndpoint::chat, R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})"));
  EXPECT_FALSE(chat.load_only);
  EXPECT_EQ(chat.generation.endpoint, Endpoint::chat_completions);
}

TEST(OllamaRequest, WrongOrUnsupportedFieldsNameThemselves) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "x", "options": {"temperature": "hot"}})", "temperature"},
      {R"({"prompt": "x", "options": {"num_predict": 0}})", "num_predict"},
      {R"({"prompt": "x", "options": 3})", "options"},
      {R"({"prompt": "x", "format": "yaml"})", "format"},
      {R"({"prompt": "x", "format": 3})", "format"},
      {R"({"prompt": "x", "format": {"type": "object", "oneOff": []}})", "format"},
      {R"({"prompt": "x", "images": ["aGk="]})", "images"},
      {R"({"prompt": "x", "stream": "no"})", "stream"},
      {R"({"prompt": 3})", "prompt"},
  };
  for (const auto& [body, field] : cases) {
    ApiError e = err(parse_ollama_request(OllamaEndpoint::generate, body));
    EXPECT_EQ(e.param, field) << body << ": " << e.message;
  }
  EXPECT_EQ(err(parse_ollama_request(OllamaEndpoint::chat, R"({"messages": [{"content": "x"}]})")).param,
            "messages[0].role");
  // Ollama's error body is {"error": "..."}.
  HttpReply reply = ollama_error(bad_request("prompt", "bad prompt"));
  EXPECT_EQ(reply.status, 400);
  EXPECT_EQ(reply.body, R"({"error":"bad prompt"})");
}

TEST(Cors, OriginListsAndWildcard) {
  CorsPolicy off({});
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.allow_origin("http://a.example"), "");
  CorsPolicy some({"http://a.example, http://b.example", "http://c.example"});
  EXPECT_TRUE(some.enabled());
  EXPECT_EQ(some.allow_origin("http://b.example"), "http://b.example");
  EXPECT_EQ(some.allow_origin("http://c.example"), "http://c.example");
  EXPECT_EQ(some.allow_origin("http://d.example"), "");
  EXPECT_EQ(some.allow_origin(""), "");
  CorsPolicy any({"*"});
  EXPECT_EQ(any.allow_origin("http://whatever.example"), "*");
}

// RFC 4648, section 10.
TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [in, out] : vectors)
    EXPECT_EQ(base64_encode(reinterpret_cast<const unsigned char*>(in), std::strlen(in)), out) << in;
}

TEST(TokenPieces, Utf8Validity) {
  EXPECT_TRUE(valid_utf8("plain"));
  EXPECT_TRUE(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x8b"));
  EXPECT_FALSE(valid_utf8("\xc3"));          // a lead byte alone (half of a split character)
  EXPECT_FALSE(valid_utf8("\x82\xac"));      // continuation bytes alone
  EXPECT_FALSE(valid_utf8("\xf0\x9f\x90"));  // truncated 4-byte sequence
}

TEST(SlotBoard, LeasesTheLowestFreeSlotAndGivesItBack) {
  SlotBoard board(2, 512, false);
  SlotTask task;
  task.id_task = 11;
  task.n_predict = 10;
  {
    auto a = std::make_unique<SlotBoard::Lease>(board.acquire(task));
    task.id_task = 12;
    auto b = std::make_unique<SlotBoard::Lease>(board.acquire(task));
    SlotBoard::Lease none = board.acquire(task);
    EXPECT_EQ(a->slot(), 0);
    EXPECT_EQ(b->slot(), 1);
    EXPECT_EQ(none.slot(), -1);  // all busy: the request waits in the engine, in no slot
    a->set_decoded(4);
    auto snap = board.snapshot();
    EXPECT_EQ(snap[0]["id_task"], 11);
    EXPECT_EQ(snap[0]["is_processing"], true);
    EXPECT_EQ(snap[0]["next_token"]["n_decoded"], 4);
    EXPECT_EQ(snap[0]["next_token"]["n_remain"], 6);
    EXPECT_EQ(snap[1]["id_task"], 12);
    EXPECT_EQ(snap[0]["n_ctx"], 512);
    a.reset();
    EXPECT_EQ(board.snapshot()[0]["is_processing"], false);
    EXPECT_EQ(board.snapshot()[0]["id_task"], -1);
    EXPECT_EQ(board.acquire(task).slot(), 0);  // (released again at once)
  }
  for (const auto& s : board.snapshot()) EXPECT_EQ(s["is_processing"], false);
}

TEST(ModelMatch, StrictByDefaultAnyOnRequest) {
  Service svc("org/model", {}, 1 << 20);
  EXPECT_TRUE(svc.model_matches(""));
  EXPECT_TRUE(svc.model_matches("org/model"));
  EXPECT_TRUE(svc.model_matches("org/model:latest"));  // Ollama's default tag
  EXPECT_FALSE(svc.model_matches("org/model:7b"));
  EXPECT_FALSE(svc.model_matches("gpt-4o"));
  svc.set_model_match(ModelMatch::any);
  EXPECT_TRUE(svc.model_matches("gpt-4o"));
  // Listing stays exact: /v1/models/{id} knows one id.
  EXPECT_EQ(svc.model("gpt-4o").status, 404);
  EXPECT_EQ(svc.model("org/model").status, 200);
}

}  // namespace
}  // namespace tandem::server

namespace tandem::server {
namespace {

// sentence-transformers' pooling declaration decides the default pooling.
TEST(Embedder, DeclaredPoolingFromSentenceTransformersConfig) {
  const std::string dir = ::testing::TempDir() + "/tandem-pooling-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/1_Pooling");
  auto declare = [&](const char* body) { std::ofstream(dir + "/1_Pooling/config.json") << body; };
  declare(R"({"word_embedding_dimension": 1024, "pooling_mode_cls_token": false,
              "pooling_mode_mean_tokens": false, "pooling_mode_lasttoken": true})");
  EXPECT_EQ(declared_pooling(dir), Pooling::last);
  declare(R"({"pooling_mode_mean_tokens": true})");
  EXPECT_EQ(declared_pooling(dir), Pooling::mean);
  declare(R"({"pooling_mode_cls_token": true})");
  EXPECT_EQ(declared_pooling(dir), std::nullopt);  // not a mode tandem has: the flag's default
  declare("not json");
  EXPECT_EQ(declared_pooling(dir), std::nullopt);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(declared_pooling(dir), std::nullopt);
}

}  // namespace
}  // namespace tandem::server

namespace tandem::server {
namespace {

TEST(OllamaRequest, ImagesInAChatMessageAreRefused) {
  ApiError e = err(parse_ollama_request(
      OllamaEndpoint::chat,
      R"({"messages": [{"role": "user", "content": "what is this?", "images": ["aGk="]}]})"));
  EXPECT_EQ(e.param, "messages[0].images");
  ok(parse_ollama_request(OllamaEndpoint::chat,
                          R"({"messages": [{"role": "user", "content": "hi", "images": []}]})"));
}

bool accepts(const StructuredRequest& s, const std::string& text) {
  grammar::ByteAutomaton a(s.grammar);
  return a.accepting(a.advance(a.start(), text));
}

// Ollama's `format` goes through the grammar engine response_format uses.
TEST(OllamaRequest, FormatJsonOrASchemaConstrainsTheOutput) {
  for (auto endpoint : {OllamaEndpoint::generate, OllamaEndpoint::chat}) {
    const std::string input = endpoint == OllamaEndpoint::generate
                                  ? R"("prompt": "x")"
                                  : R"("messages": [{"role": "user", "content": "x"}])";
    OllamaRequest json_format = ok(parse_ollama_request(endpoint, "{" + input + R"(, "format": "json"})"));
    const StructuredRequest& j = json_format.generation.structured;
    ASSERT_NE(j.grammar, nullptr);
    EXPECT_EQ(j.grammar_source, "format");
    EXPECT_TRUE(accepts(j, R"({"a": [1, "b"]})"));
    EXPECT_FALSE(accepts(j, "Sure! {"));
    // A schema: properties in the schema's order, required ones present.
    OllamaRequest schema = ok(parse_ollama_request(
        endpoint,
        "{" + input +
            R"(, "format": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}})"));
    const StructuredRequest& s = schema.generation.structured;
    ASSERT_NE(s.grammar, nullptr);
    EXPECT_TRUE(accepts(s, R"({"name": "Ann", "age": 7})"));
    EXPECT_FALSE(accepts(s, R"({"age": 7, "name": "Ann"})"));
    EXPECT_FALSE(accepts(s, R"({"name": "Ann"})"));
    // "" and null: unconstrained, as Ollama.
    EXPECT_EQ(
        ok(parse_ollama_request(endpoint, "{" + input + R"(, "format": ""})")).generation.structured.grammar,
        nullptr);
    EXPECT_EQ(ok(parse_ollama_request(endpoint, "{" + input + R"(, "format": null})"))
                  .generation.structured.grammar,
              nullptr);
  }
}

}  // namespace
}  // namespace tandem::server
