// HttpServer: the cpp-httplib adapter. Knows HTTP, nothing else: it checks
// the API key (every route but /health, and CORS preflights), the body size
// limit, maps routes to Service methods and writes their replies or SSE
// streams; the llama-server, Ollama and embeddings routes and CORS are in
// compat_routes.h. Every error
// body comes from api_error.h. Thread-safe as cpp-httplib is: one worker
// thread per connection from its pool.
#pragma once

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
  // --cors-origin values (each may be a comma list; "*": any). Empty: CORS off.
  std::vector<std::string> cors_origins;
};

class HttpServer {
 public:
  HttpServer(Service& service, HttpOptions options);
  ~HttpServer();

  // Binds the listening socket; errors name host:port.
  Status bind();
  int port() const { return port_; }
  // Serves until stop(); blocks.
  void run();
  void stop();

 private:
  void install_routes();

  Service& service_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
};

}  // namespace tandem::server
