// The routes beyond the OpenAI core that make tandem a drop-in for other
// servers' clients, installed on the cpp-httplib server by HttpServer:
// llama-server's /tokenize, /detokenize, /apply-template, /props, /slots and
// /completion (SSE when streamed); OpenAI's /v1/models/{id} and
// /v1/embeddings; Ollama's /api/* (NDJSON when streamed). The shapes are in
// llama_api.h, ollama_api.h and embeddings_api.h; this file is the HTTP side
// only (docs/api.md lists every route). Also the CORS policy (--cors-origin).
// Thread-safe as cpp-httplib's handlers are.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "server/service.h"

namespace httplib {
class Server;
class DataSink;
struct Request;
struct Response;
}  // namespace httplib

namespace tandem::server {

void write_reply(httplib::Response& res, const HttpReply& reply);

// Streams what `provider` writes as the response body: chunked to an HTTP/1.1 client; to an
// HTTP/1.0 one, which has no chunked coding (RFC 9112 section 6.1: a server must not send it
// Transfer-Encoding), as plain bytes ended by closing the connection. `done` runs when the
// stream ends, however it ends.
void stream_response(const httplib::Request& req, httplib::Response& res, const char* content_type,
                     std::function<bool(size_t, httplib::DataSink&)> provider,
                     std::function<void(bool)> done);

// What stops an embeddings request part way, besides its client leaving (embeddings_api.h).
struct EmbedLimits {
  int timeout_s = 0;                      // -to/--timeout: how long one request may run; 0: no limit
  std::function<bool()> server_stopping;  // true once the server stops (after the shutdown drain)
};

void install_compat_routes(httplib::Server& http, Service& service, EmbedLimits embed_limits);

// CORS (docs/adr/0017-compat-endpoints.md): `origins` from --cors-origin
// (each entry may be a comma list; "*" allows any origin). Empty: CORS off —
// no Access-Control-* headers and OPTIONS is not a route.
class CorsPolicy {
 public:
  explicit CorsPolicy(const std::vector<std::string>& origins);
  bool enabled() const { return any_ || !origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request's Origin header ("" : none).
  std::string allow_origin(const std::string& origin) const;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;
};

// Adds Access-Control-Allow-Origin (and Vary: Origin) to every response and
// answers OPTIONS preflights 204 with the allowed methods and headers.
void install_cors(httplib::Server& http, const CorsPolicy& policy);

}  // namespace tandem::server
