// HttpServer: the cpp-httplib adapter. Knows HTTP, nothing else: it checks
// the API key (every route but /health and the web page's files), the body size limit, maps routes
// to Service methods and writes their replies or SSE streams. Every error
// body comes from api_error.h. Thread-safe as cpp-httplib is: one worker
// thread per connection from its pool.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/service.h"

namespace httplib {
class Server;
}

namespace tandem::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: pick a free port
  int worker_threads = 16;  // concurrent connections served
  int timeout_s = 0;        // socket read/write timeout (-to/--timeout); 0: cpp-httplib's defaults
  // Parsed from serve's flags (issue 19); the routes that act on them come with their endpoints.
  bool webui = true;         // --webui / --no-webui: serve the web page at / (docs/webui.md)
  std::string cors_origins;  // --cors-origin(s): comma-separated allowed origins; "": the default
  bool embeddings = false;   // --embeddings: serve /v1/embeddings
  std::string pooling;       // --pooling none|mean|cls|last|rank; "": the model's default
  int embd_normalize = 2;    // --embd-normalize: -1 none, 0 max-abs, 1 taxicab, 2 euclidean, >2 p-norm
};

class HttpServer {
 public:
  HttpServer(Service& service, HttpOptions options);
  ~HttpServer();

  // Binds the listening socket; errors name host:port.
  Status bind();
  int port() const { return port_; }
  // Serves until stop(); blocks. stop() may come first (from another
  // thread, e.g. a load that failed at once): run() then returns at once.
  void run();
  void stop();

 private:
  void install_routes();
  void install_webui_routes();

  Service& service_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<bool> stop_requested_{false}, run_entered_{false}, run_exited_{false};
};

}  // namespace tandem::server
