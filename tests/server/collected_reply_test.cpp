// answer_collected over a real cpp-httplib server on 127.0.0.1: the collected
// status is the HTTP status the client sees (a generation error is 500, not
// 200 with an error body), and a client that closes its connection while the
// run is collected is noticed (alive() turns false).
#include "server/collected_reply.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tandem::server {
namespace {

class CollectedReplyTest : public ::testing::Test {
 protected:
  void start(CollectFn collect) {
    server_.Post("/gen", [collect](const httplib::Request& req, httplib::Response& res) {
      answer_collected(req, res, collect);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
};

TEST_F(CollectedReplyTest, ErrorStatusIsTheHttpStatus) {
  const std::string body = R"({"error":{"message":"generation failed: out of KV","code":"internal_error"}})";
  start([&body](const std::function<bool()>&) { return std::pair<int, std::string>{500, body}; });
  httplib::Client client("127.0.0.1", port_);
  auto r = client.Post("/gen", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body, body);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
}

TEST_F(CollectedReplyTest, ServiceUnavailableAndOkPassThrough) {
  std::atomic<int> next{503};
  start([&next](const std::function<bool()>&) {
    return std::pair<int, std::string>{next.load(), "{\"n\":" + std::to_string(next.load()) + "}"};
  });
  httplib::Client client("127.0.0.1", port_);
  auto a = client.Post("/gen", "{}", "application/json");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 503);
  EXPECT_EQ(a->body, "{\"n\":503}");
  next = 200;
  auto b = client.Post("/gen", "{}", "application/json");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 200);
  EXPECT_EQ(b->body, "{\"n\":200}");
}

TEST_F(CollectedReplyTest, ClientThatClosesIsNoticed) {
  std::atomic<bool> started{false}, noticed{false};
  start([&](const std::function<bool()>& alive) {
    started = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (!alive()) {
        noticed = true;
        return std::pair<int, std::string>{499, ""};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::pair<int, std::string>{200, "{}"};
  });
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request =
      "POST /gen HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
  ASSERT_EQ(send(s, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  for (int i = 0; i < 500 && !started; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(started);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(noticed) << "the client is still connected";
  close(s);
  for (int i = 0; i < 500 && !noticed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(noticed) << "the closed connection was not noticed within 5 s";
}

}  // namespace
}  // namespace tandem::server
