// HttpServer: the cpp-httplib adapter. Knows HTTP, nothing else: it checks
// the API key (every route but /health, the web page's files and CORS
// preflights), the body size limit, maps routes to Service methods and writes
// their replies or SSE streams; the llama-server, Ollama and embeddings routes
// and CORS are in compat_routes.h. Every error
// body comes from api_error.h. Thread-safe as cpp-httplib is: one worker
// thread per connection from its pool.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

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
  // A request must arrive within request_grace_ms plus a second per request_min_bytes_per_s bytes
  // sent, whatever the read timeout: one trickling a byte every few seconds would hold a worker.
  int request_grace_ms = 10000;
  int request_min_bytes_per_s = 1024;
  bool webui = true;  // --webui / --no-webui: serve the web page at / (docs/webui.md)
  // --cors-origin values (each may be a comma list; "*": any). Empty: CORS off.
  std::vector<std::string> cors_origins;
  bool embeddings = false;  // --embeddings: serve /v1/embeddings
  std::string pooling;      // --pooling mean|last; "": the model's (1_Pooling/config.json), else mean
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
