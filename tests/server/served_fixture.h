// The fixture of the tests that call the routes needing a loaded model: a Service serving the
// bundled target (models/tandem-target, context 64, --embeddings, one sequence at a time), loaded
// once per test suite, and LiveServer, an HttpServer for it on an ephemeral port.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>

#include "runtime/opened_model.h"
#include "server/http_server.h"
#include "server/service.h"

namespace tandem::server {

// *out = a started Service for the bundled target (one thread, `context` tokens, `max_running`
// sequences, `defaults`); left null when a step fails (the ASSERT says which).
inline void serve_bundled_target(Service** out, int64_t context, int max_running,
                                 RequestDefaults defaults = {}, bool embeddings = false) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  ASSERT_NE(root, nullptr) << "TANDEM_SOURCE_DIR is set by CTest";
  runtime::OpenOptions o;
  o.model_dir = std::string(root) + "/models/tandem-target";
  o.threads = 1;
  auto opened = runtime::open_model(o);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  scheduler::EngineConfig config;
  config.context = context;
  config.max_running = max_running;
  config.threads = 1;
  auto served = runtime::make_served_model(std::move(*opened), config);
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  *out = new Service("tandem-target", ApiKeys{}, 1 << 24);
  (*out)->set_embeddings(embeddings);
  (*out)->attach(std::move(*served), std::move(defaults));
  (*out)->engine()->start();
}

class ServedRoutesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { serve_bundled_target(&service_, 64, 1, {}, true); }
  static void TearDownTestSuite() {
    delete service_;
    service_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(service_, nullptr) << "the bundled target did not load"; }

  inline static Service* service_ = nullptr;
};

// An HttpServer for `service` on an ephemeral port (4 workers, no web UI), run on its own
// thread from construction until destruction (also when an ASSERT leaves the test early).
class LiveServer {
 public:
  explicit LiveServer(Service& service, int timeout_s = 0)
      : server_(service, options(timeout_s)), bound_(server_.bind().ok()) {
    if (bound_) thread_ = std::thread([this] { server_.run(); });
  }
  ~LiveServer() {
    if (!bound_) return;
    server_.stop();
    thread_.join();
  }
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;
  bool bound() const { return bound_; }
  int port() const { return server_.port(); }

 private:
  static HttpOptions options(int timeout_s) {
    HttpOptions o;
    o.port = 0;
    o.timeout_s = timeout_s;
    o.worker_threads = 4;
    o.webui = false;
    return o;
  }
  HttpServer server_;
  bool bound_;
  std::thread thread_;
};

// POST `body` to `path`: the status and the parsed reply (-1 and null when no reply came).
inline std::pair<int, nlohmann::json> post_json(httplib::Client& client, const char* path,
                                                const nlohmann::json& body) {
  auto reply = client.Post(path, body.dump(), "application/json");
  return reply ? std::make_pair(reply->status, nlohmann::json::parse(reply->body, nullptr, false))
               : std::make_pair(-1, nlohmann::json());
}

}  // namespace tandem::server
