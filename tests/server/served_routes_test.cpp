// The routes that need a loaded model, called as the HTTP adapter calls them,
// on a Service serving the bundled target (served_fixture.h).
// What a hostile body can make them hold: limits on inputs, replies whose
// memory follows their text.
#include <gtest/gtest.h>
#include <httplib.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "raw_http.h"
#include "served_fixture.h"
#include "server/embeddings_api.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/llama_api.h"
#include "server/service.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TANDEM_HAS_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef TANDEM_HAS_ADDRESS_SANITIZER
#define TANDEM_HAS_ADDRESS_SANITIZER 0
#endif

namespace tandem::server {
namespace {

nlohmann::json words(size_t n) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) a.push_back("a");
  return a;
}

// An embeddings input array longer than OpenAI's 2048 is a 400 naming the field before any forward runs.
// 40,000 one-word inputs (a 200 kB body) used to be embedded and written out, taking the server to 1.6 GB.
TEST_F(ServedRoutesTest, MoreEmbeddingInputsThanTheLimitAreRefused) {
  Service& svc = *service_;
  ASSERT_NE(svc.embedder(), nullptr);
  const size_t over = kMaxEmbeddingInputs + 1;
  HttpReply openai = openai_embeddings(svc, nlohmann::json{{"input", words(over)}}.dump());
  EXPECT_EQ(openai.status, 400) << openai.body.substr(0, 200);
  auto error = nlohmann::json::parse(openai.body)["error"];
  EXPECT_EQ(error["param"], "input");
  EXPECT_NE(error["message"].get<std::string>().find("2049 inputs"), std::string::npos) << error["message"];
  HttpReply ollama = ollama_embed(svc, nlohmann::json{{"input", words(40000)}}.dump(), false);
  EXPECT_EQ(ollama.status, 400) << ollama.body.substr(0, 200);
  // Token-id arrays count as inputs too; a single flat array of ids is one input.
  nlohmann::json ids = nlohmann::json::array();
  for (size_t i = 0; i < over; ++i) ids.push_back({5});
  EXPECT_EQ(openai_embeddings(svc, nlohmann::json{{"input", ids}}.dump()).status, 400);
  // At the limit they are embedded, one vector per input.
  HttpReply ok = openai_embeddings(svc, nlohmann::json{{"input", words(kMaxEmbeddingInputs)}}.dump());
  ASSERT_EQ(ok.status, 200) << ok.body.substr(0, 200);
  EXPECT_EQ(nlohmann::json::parse(ok.body)["data"].size(), kMaxEmbeddingInputs);
}

// `n` inputs of 60 token ids each (the context is 64): each is a forward of its own.
std::string long_embeddings_body(size_t n) {
  nlohmann::json inputs = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) {
    nlohmann::json ids = nlohmann::json::array();
    for (int t = 0; t < 60; ++t) ids.push_back(static_cast<int>((i * 131 + t * 17) % 8000 + 10));
    inputs.push_back(std::move(ids));
  }
  return nlohmann::json{{"input", inputs}}.dump();
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Embeddings run on the HTTP worker under the embedder's one mutex. A client that sent 2048 long
// inputs and left kept that batch running to its end, and every other embeddings request waiting
// behind it. Now the batch stops at its next forward once the client is gone.
TEST_F(ServedRoutesTest, EmbeddingsStopWhenTheClientLeaves) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  // What the whole batch would cost, from a sixteenth of it.
  auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(openai_embeddings(*service_, long_embeddings_body(kMaxEmbeddingInputs / 16)).status, 200);
  const double full_batch_s = seconds_since(started) * 16;
  ASSERT_GT(full_batch_s, 4.0) << "the batch is too short to tell a stopped one from a finished one";
  const std::string body = long_embeddings_body(kMaxEmbeddingInputs);
  const int s = testing::connect_local(server.port());
  ASSERT_GE(s, 0);
  const std::string request =
      "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(s, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the batch is running
  close(s);
  // The embedder is free again within a forward or two: a short request gets its vector.
  started = std::chrono::steady_clock::now();
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  auto reply = client.Post("/v1/embeddings", R"({"input": "Call me Ishmael."})", "application/json");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->body.substr(0, 200);
  EXPECT_LT(seconds_since(started), full_batch_s / 4)
      << "the abandoned batch ran on (whole batch: ~" << full_batch_s << " s)";
}

// With -to/--timeout, an embeddings request stops at its next forward once it has run that long:
// a 503 "timeout", and the embedder is free for the next request.
TEST_F(ServedRoutesTest, EmbeddingsStopAtTheTimeout) {
  LiveServer server(*service_, 1);
  ASSERT_TRUE(server.bound());
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  const auto started = std::chrono::steady_clock::now();
  auto reply = client.Post("/v1/embeddings", long_embeddings_body(kMaxEmbeddingInputs), "application/json");
  const double took = seconds_since(started);
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 503) << reply->body.substr(0, 200);
  const auto error = nlohmann::json::parse(reply->body, nullptr, false)["error"];
  EXPECT_EQ(error["code"], "timeout") << reply->body.substr(0, 300);
  EXPECT_NE(error["message"].get<std::string>().find("of 2048 inputs"), std::string::npos) << error;
  EXPECT_LT(took, 3.0);
  auto ollama = client.Post("/api/embed", long_embeddings_body(kMaxEmbeddingInputs), "application/json");
  ASSERT_TRUE(ollama);
  EXPECT_EQ(ollama->status, 503) << ollama->body.substr(0, 200);
  EXPECT_EQ(client.Post("/v1/embeddings", R"({"input": "Call me Ishmael."})", "application/json")->status,
            200);
}

// The server stopping (SIGTERM, after the drain) ends an embeddings batch at its next forward
// with a 503, as it cuts a generation request: a long batch held the stop (and the process's
// exit) until its last input.
TEST_F(ServedRoutesTest, EmbeddingsStopWhenTheServerStops) {
  auto server = std::make_unique<LiveServer>(*service_);
  ASSERT_TRUE(server->bound());
  const int port = server->port();
  int status = -1;
  std::string body;
  std::thread client([&status, &body, port] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    if (auto r = c.Post("/v1/embeddings", long_embeddings_body(kMaxEmbeddingInputs), "application/json")) {
      status = r->status;
      body = r->body;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the batch is running
  const auto started = std::chrono::steady_clock::now();
  server.reset();  // stops, and waits for its workers
  const double stop_s = seconds_since(started);
  client.join();
  EXPECT_LT(stop_s, 3.0) << "the stop waited for the batch";
  EXPECT_EQ(status, 503) << body.substr(0, 200);
  EXPECT_NE(body.find("shutting down"), std::string::npos) << body.substr(0, 300);
}

// /tokenize with "with_pieces" built a json tree of {"id", "piece"} objects, ~300 bytes a token:
// a 4 MB body of one-letter words held 1.9 GB. The reply is now written as text; it must be the
// same JSON: every id with its piece, and (byte-level BPE, no normalizer) the pieces of a text
// concatenate to that text. A piece that is not UTF-8 is an array of its bytes.
TEST_F(ServedRoutesTest, TokenizeWithPiecesSpellsTheText) {
  const std::string text = "Call me Ishmael. \xC3\xA9t\xC3\xA9 \xE2\x82\xAC 12345 \xF0\x9F\x90\x8B!";
  HttpReply plain = llama_tokenize(*service_, nlohmann::json{{"content", text}}.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  HttpReply pieces =
      llama_tokenize(*service_, nlohmann::json{{"content", text}, {"with_pieces", true}}.dump());
  ASSERT_EQ(pieces.status, 200) << pieces.body;
  const auto ids = nlohmann::json::parse(plain.body)["tokens"];
  const auto entries = nlohmann::json::parse(pieces.body)["tokens"];
  ASSERT_EQ(ids.size(), entries.size());
  ASSERT_GT(ids.size(), 5u);
  std::string spelled;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(entries[i]["id"], ids[i]) << i;
    const auto& piece = entries[i]["piece"];
    if (piece.is_string()) {
      spelled += piece.get<std::string>();
    } else {
      ASSERT_TRUE(piece.is_array()) << piece;
      for (const auto& byte : piece) spelled += static_cast<char>(byte.get<int>());
    }
  }
  EXPECT_EQ(spelled, text);
  EXPECT_EQ(nlohmann::json::parse(llama_tokenize(*service_, R"({"content": ""})").body),
            nlohmann::json::parse(R"({"tokens": []})"));
}

// Resident memory in MiB, from /proc/self/statm.
int64_t resident_mib() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE) / (1 << 20);
}

// A 4 MB body of 120,000 empty messages is parsed and copied as JSON trees of small blocks,
// ~150 MB, all freed when the request ends. glibc kept that memory in each worker's arena: a
// dozen 8 MB bodies left the server at 3.3 GB resident for good. Requests that move a megabyte
// or more now hand it back (malloc_trim); what stays is the arenas' working set.
TEST_F(ServedRoutesTest, MemoryOfLargeBodiesIsReturned) {
#if defined(__SANITIZE_ADDRESS__) || TANDEM_HAS_ADDRESS_SANITIZER
  GTEST_SKIP() << "AddressSanitizer's allocator holds freed memory in its quarantine";
#else
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  nlohmann::json messages = nlohmann::json::array();
  for (int i = 0; i < 120000; ++i) messages.push_back({{"role", "user"}, {"content", ""}});
  const std::string body = nlohmann::json{{"messages", messages}}.dump();
  messages = nullptr;
  const int64_t before = resident_mib();
  int64_t peak = before;
  for (int i = 0; i < 8; ++i) {
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(60, 0);
    auto reply = client.Post("/apply-template", body, "application/json");
    ASSERT_TRUE(reply) << "request " << i;
    EXPECT_EQ(reply->status, 400) << reply->body.substr(0, 200);  // the template's statement limit
    peak = std::max(peak, resident_mib());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the worker trims after replying
  const int64_t after = resident_mib();
  // Measured on the 2-core build machine: +110 MiB with the trim (four arenas' working sets),
  // +780 MiB without (each of the four workers' arenas kept a request's peak).
  EXPECT_LT(after - before, 300) << "MiB resident: " << before << " before, " << peak << " at most, " << after
                                 << " after 8 requests";
#endif
}

// An HTTP/1.0 client has no chunked coding: RFC 9112 section 6.1 says a server must not send
// Transfer-Encoding in reply to one. Streams were chunked whatever the request's version, so such a
// client read chunk sizes inside its events. They now come as plain bytes that end when the
// server closes the connection; HTTP/1.1 clients still get chunks.
TEST_F(ServedRoutesTest, StreamsToAnHttp10ClientAreNotChunked) {
  LiveServer server(*service_);
  ASSERT_TRUE(server.bound());
  const std::pair<const char*, std::string> routes[] = {
      {"/v1/completions", R"({"prompt": "Call me", "max_tokens": 3, "stream": true, "temperature": 0})"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": true, "temperature": 0})"},
      {"/completion", R"({"prompt": "Call me", "n_predict": 3, "stream": true, "temperature": 0})"},
      {"/api/generate", R"({"prompt": "Call me", "options": {"num_predict": 3, "temperature": 0}})"},
  };
  for (const auto& [path, body] : routes) {
    for (const char* version : {"HTTP/1.0", "HTTP/1.1"}) {
      const std::string reply = testing::exchange(
          server.port(), std::string("POST ") + path + " " + version +
                             "\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                             "Content-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body);
      ASSERT_EQ(testing::status_of(reply), 200) << path << " " << version << ": " << reply;
      const size_t head_end = reply.find("\r\n\r\n");
      ASSERT_NE(head_end, std::string::npos);
      const std::string head = reply.substr(0, head_end), payload = reply.substr(head_end + 4);
      const bool chunked = head.find("Transfer-Encoding: chunked") != std::string::npos;
      if (std::string(version) == "HTTP/1.1") {
        EXPECT_TRUE(chunked) << path << ": " << head;
        continue;
      }
      EXPECT_FALSE(chunked) << path << ": " << head;
      // The payload is the events themselves: SSE "data: {json}\n\n" or NDJSON lines.
      const bool sse = std::string(path) != "/api/generate";
      const std::string separator = sse ? "\n\n" : "\n";
      size_t events = 0;
      for (size_t at = 0; at < payload.size();) {
        const size_t end = payload.find(separator, at);
        ASSERT_NE(end, std::string::npos) << path << ": unterminated event in " << payload;
        std::string event = payload.substr(at, end - at);
        at = end + separator.size();
        ++events;
        if (sse) {
          ASSERT_EQ(event.rfind("data: ", 0), 0u) << path << ": " << event;
          event = event.substr(6);
          if (event == "[DONE]") continue;
        }
        EXPECT_FALSE(nlohmann::json::parse(event, nullptr, false).is_discarded()) << path << ": " << event;
      }
      EXPECT_GE(events, 2u) << path << ": " << payload;
      if (sse && std::string(path) != "/completion") {
        EXPECT_EQ(payload.substr(payload.size() - 14), "data: [DONE]\n\n");
      }
    }
  }
}

// A process's memory in KiB from /proc/self/status: "VmRSS", or "VmHWM" (its peak).
int64_t status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::string prefix = std::string(field) + ":";
  for (std::string line; std::getline(status, line);)
    if (line.rfind(prefix, 0) == 0) return std::atoll(line.c_str() + prefix.size());
  return -1;
}

// An 8 MB chat body of 200,000 short messages peaked ~300 MB above the body while parsed: the
// body was held as four JSON trees at once (the field checks' parse, its copy of the messages, the
// key-order-keeping parse and its copy of them), and the messages were copied once more for the
// template. Each tree is now released or moved before the next is made.
TEST_F(ServedRoutesTest, ALargeChatBodyIsNotHeldAsSeveralTrees) {
#if defined(__SANITIZE_ADDRESS__) || TANDEM_HAS_ADDRESS_SANITIZER
  GTEST_SKIP() << "AddressSanitizer's allocator holds freed memory in its quarantine";
#else
  nlohmann::json messages = nlohmann::json::array();
  for (int i = 0; i < 200000; ++i)
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "hello there"}});
  const std::string body = nlohmann::json{{"messages", messages}, {"max_tokens", 1}}.dump();
  messages = nullptr;
  ASSERT_GT(body.size(), size_t{8} << 20);
  malloc_trim(0);
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";  // resets VmHWM to the current RSS (Linux 4.0)
    if (!clear.flush()) GTEST_SKIP() << "cannot reset VmHWM here";
  }
  const int64_t before = status_kib("VmRSS");
  auto started = service_->start_generation(Endpoint::chat_completions, body);
  const int64_t peak_mib = (status_kib("VmHWM") - before) >> 10;
  // The template's statement limit refuses 200,000 messages, after the parses and the render.
  ASSERT_TRUE(std::holds_alternative<ApiError>(started));
  EXPECT_NE(std::get<ApiError>(started).message.find("statements"), std::string::npos)
      << std::get<ApiError>(started).message;
  // Measured on the 2-core build machine: 296 MiB before, 177 MiB now (one tree of ~118 MiB at a
  // time, and the template's work on it).
  EXPECT_LT(peak_mib, 230) << "MiB above the RSS before the request";
#endif
}

}  // namespace
}  // namespace tandem::server
