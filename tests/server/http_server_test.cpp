// HttpServer over 127.0.0.1 before a model is attached: what a hostile client
// can send to the routes and error handlers that need no model, sent as raw
// bytes. Each case must get an answer in the OpenAI error shape and leave the
// server answering /health; none may take the process down.
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "raw_http.h"

namespace tandem::server {
namespace {

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpOptions options;
    options.port = 0;
    options.worker_threads = 4;
    options.webui = false;
    start(options);
  }
  void start(const HttpOptions& options) {
    if (server_) TearDown();
    server_ = std::make_unique<HttpServer>(service_, options);
    ASSERT_TRUE(server_->bind().ok());
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  int connect_to_server(int timeout_s = 10) const {
    return testing::connect_local(server_->port(), timeout_s);
  }
  std::string exchange(const std::string& request) const {
    return testing::exchange(server_->port(), request);
  }
  static int status_of(const std::string& reply) { return testing::status_of(reply); }
  static nlohmann::json body_of(const std::string& reply) {
    const size_t end = reply.find("\r\n\r\n");
    return nlohmann::json::parse(end == std::string::npos ? "" : reply.substr(end + 4), nullptr, false);
  }
  void expect_still_answering() const {
    const std::string health = exchange("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(status_of(health), 503) << "the server stopped answering: " << health;  // 503: loading
  }

  Service service_{"served-model", ApiKeys{}, 1 << 20};
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

// A percent-escape decodes to a byte that is not UTF-8 ("/%ff" is the byte 0xFF): the 404 and
// model_not_found messages quote it. It used to throw out of error_body (nlohmann::json's dump
// refuses invalid UTF-8) inside httplib's error handler, terminating the server.
TEST_F(HttpServerTest, PathsThatAreNotUtf8GetTheirErrorAndTheServerStaysUp) {
  const std::pair<const char*, int> cases[] = {
      {"GET /%ff HTTP/1.1", 404},           {"POST /%c3 HTTP/1.1", 404},
      {"GET /v1/models/%ff HTTP/1.1", 404}, {"GET /v1/models/a%e2%82 HTTP/1.1", 404},
      {"DELETE /%80%80 HTTP/1.1", 404},
  };
  for (const auto& [line, expected] : cases) {
    const std::string reply =
        exchange(std::string(line) + "\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(status_of(reply), expected) << line << ": " << reply;
    const nlohmann::json body = body_of(reply);
    ASSERT_TRUE(body.is_object() && body.contains("error")) << line << ": " << reply;
    // U+FFFD (EF BF BD) stands for each byte that is not UTF-8 (Unicode 15, section 3.9, U+FFFD
    // substitution).
    EXPECT_NE(body["error"]["message"].get<std::string>().find("\xEF\xBF\xBD"), std::string::npos) << line;
    expect_still_answering();
  }
}

// cpp-httplib 0.11 checks the body limit (--max-body-bytes, 1 MiB here) against Content-Length
// only: a chunked body of any size was read into memory (200 MiB took the server 280 MB). A
// request may now send twice the limit (chunk framing) plus 1 MiB; past that it gets a 413.
TEST_F(HttpServerTest, ChunkedBodiesPastTheLimitGet413) {
  auto chunked = [](size_t total) {
    std::string body;
    const std::string chunk(64 * 1024, 'x');
    for (size_t sent = 0; sent < total; sent += chunk.size()) body += "10000\r\n" + chunk + "\r\n";
    return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: "
           "chunked\r\n\r\n" +
           body + "0\r\n\r\n";
  };
  // Sent in pieces: the server stops reading at the limit, so a send may fail part way.
  const int s = connect_to_server();
  ASSERT_GE(s, 0);
  const std::string request = chunked(size_t{8} << 20);
  for (size_t at = 0; at < request.size();) {
    const ssize_t n =
        send(s, request.data() + at, std::min<size_t>(request.size() - at, 65536), MSG_NOSIGNAL);
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  std::string over;
  char buffer[4096];
  for (ssize_t n; (n = recv(s, buffer, sizeof(buffer), 0)) > 0;) over.append(buffer, static_cast<size_t>(n));
  close(s);
  EXPECT_EQ(status_of(over), 413) << over.substr(0, 300);
  const nlohmann::json body = body_of(over);
  ASSERT_TRUE(body.is_object()) << over.substr(0, 300);
  EXPECT_EQ(body["error"]["code"], "request_too_large");
  expect_still_answering();
  // Under the limit the body is read and the route answers (503: no model is loaded).
  EXPECT_EQ(status_of(exchange(chunked(size_t{512} << 10))), 503);
}

// A client that sends its whole body before it reads (curl, Python's http.client) must read the 413.
// The server stopped reading at its limit (twice --max-body-bytes plus 1 MiB), answered and closed
// with the rest of the body unread: close() then sends a TCP reset, which made the client's send fail
// and its kernel drop the 413 it had not read yet. The server now discards the rest after the answer
// (a lingering close) and ends the connection with a FIN. Three rounds of each framing, since how much
// of the reply a reset destroyed varied from run to run.
TEST_F(HttpServerTest, BodiesPastTheLimitGet413NotAReset) {
  // The limit is 1 MiB, the read cap 3 MiB: 29 MiB more than socket buffers hold between the two.
  const size_t total = size_t{32} << 20;
  const std::string plain =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(total) + "\r\n\r\n" + std::string(total, ' ');
  std::string chunked = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk(64 * 1024, 'x');
  for (size_t sent = 0; sent < total; sent += chunk.size()) chunked += "10000\r\n" + chunk + "\r\n";
  chunked += "0\r\n\r\n";
  for (int round = 0; round < 3; ++round) {
    for (const std::string* request : {&plain, static_cast<const std::string*>(&chunked)}) {
      const bool is_chunked = request == &chunked;
      const int s = connect_to_server();
      ASSERT_GE(s, 0);
      size_t at = 0;
      while (at < request->size()) {
        const ssize_t n = send(s, request->data() + at, request->size() - at, MSG_NOSIGNAL);
        if (n <= 0) break;
        at += static_cast<size_t>(n);
      }
      const int send_errno = at == request->size() ? 0 : errno;
      std::string reply;
      char buffer[4096];
      ssize_t n;
      while ((n = recv(s, buffer, sizeof(buffer), 0)) > 0) reply.append(buffer, static_cast<size_t>(n));
      const int recv_errno = n < 0 ? errno : 0;
      close(s);
      EXPECT_EQ(at, request->size()) << (is_chunked ? "chunked" : "Content-Length") << ": send failed, "
                                     << std::strerror(send_errno);
      EXPECT_EQ(recv_errno, 0) << (is_chunked ? "chunked" : "Content-Length") << ": "
                               << std::strerror(recv_errno);
      EXPECT_EQ(status_of(reply), 413) << reply.substr(0, 300);
      const nlohmann::json body = body_of(reply);
      ASSERT_TRUE(body.is_object()) << reply.substr(0, 300);
      EXPECT_EQ(body["error"]["code"], "request_too_large");
      EXPECT_EQ(body["error"]["type"], "invalid_request_error");
      EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply.substr(0, 300);
      if (!is_chunked)  // the size the client declared, not the part read before the refusal
        EXPECT_NE(body["error"]["message"].get<std::string>().find(std::to_string(total)), std::string::npos)
            << body;
    }
  }
  expect_still_answering();
}

// HTTP/1.1 pipelining: a client may send its next requests before the first answer (RFC 9112
// section 9.3.2), and the server answers them in order. Bytes read past a request went with its
// stream: the second request got no answer and the client waited until the idle timeout.
TEST_F(HttpServerTest, PipelinedRequestsAreAllAnswered) {
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  const std::string last = "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const auto started = std::chrono::steady_clock::now();
  const std::string reply = exchange(get + post + get + last);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::vector<int> statuses;
  for (size_t at = reply.find("HTTP/1.1 "); at != std::string::npos; at = reply.find("HTTP/1.1 ", at + 1))
    statuses.push_back(std::atoi(reply.c_str() + at + 9));
  // 503: /health and generation while no model is loaded; 200: /v1/models.
  EXPECT_EQ(statuses, (std::vector<int>{503, 503, 503, 200})) << reply;
  EXPECT_LT(seconds, 2.0) << "the answers waited for the idle timeout";
}

// A request answered before its body was read (a 401 from the key check) leaves that body on
// the connection; it is not a request, so the connection closes after the answer.
TEST_F(HttpServerTest, AnUnreadBodyIsNotParsedAsTheNextRequest) {
  auto keys = ApiKeys::load("k1", "");
  ASSERT_TRUE(keys.ok());
  Service keyed("served-model", std::move(*keys), 1 << 20);
  HttpOptions options;
  options.port = 0;
  options.worker_threads = 2;
  options.webui = false;
  HttpServer server(keyed, options);
  ASSERT_TRUE(server.bind().ok());
  std::thread thread([&server] { server.run(); });
  const std::string body = R"({"prompt": "GET /health HTTP/1.1"})";
  const std::string reply = testing::exchange(
      server.port(),
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n\r\n" + body + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(testing::status_of(reply), 401) << reply;
  EXPECT_EQ(reply.find("HTTP/1.1", 1), std::string::npos)
      << "one answer, then the connection closes: " << reply;
  server.stop();
  thread.join();
}

// Slowloris: clients that send a request's head one byte at a time, each byte well inside the
// read timeout. Each used to hold its worker for as long as it kept sending; with one such
// client per worker the server answered nothing, /health included. A request must now arrive
// within the grace plus a second per request_min_bytes_per_s bytes: these are dropped.
TEST_F(HttpServerTest, ClientsTricklingARequestAreDroppedAndTheServerAnswers) {
  HttpOptions options;
  options.port = 0;
  options.worker_threads = 2;
  options.webui = false;
  options.request_grace_ms = 1000;
  options.request_min_bytes_per_s = 1024;
  start(options);
  std::vector<int> slow;
  for (int i = 0; i < options.worker_threads; ++i) {
    slow.push_back(connect_to_server(1));
    ASSERT_GE(slow.back(), 0);
  }
  std::vector<bool> dropped(slow.size(), false);
  const std::string head = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  const auto started = std::chrono::steady_clock::now();
  // One byte per connection every 100 ms (the read timeout is 5 s) for up to 8 s.
  for (size_t sent = 0; std::chrono::steady_clock::now() - started < std::chrono::seconds(8); ++sent) {
    bool all_dropped = true;
    for (size_t i = 0; i < slow.size(); ++i) {
      if (dropped[i]) continue;
      const char byte = sent < head.size() ? head[sent] : 'x';
      char reply[256];
      if (send(slow[i], &byte, 1, MSG_NOSIGNAL) != 1 ||
          recv(slow[i], reply, sizeof(reply), MSG_DONTWAIT) == 0)
        dropped[i] = true;
      all_dropped = all_dropped && dropped[i];
    }
    if (all_dropped) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (size_t i = 0; i < slow.size(); ++i) {
    EXPECT_TRUE(dropped[i]) << "connection " << i << " still held its worker after " << seconds << " s";
    close(slow[i]);
  }
  EXPECT_LT(seconds, 5.0);
  expect_still_answering();
  // A request sent at once is unaffected.
  EXPECT_EQ(status_of(exchange("GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")), 200);
}

}  // namespace
}  // namespace tandem::server
