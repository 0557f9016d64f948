#include "server/http_server.h"

#include <httplib.h>

#include <thread>

#include "core/log.h"
#include "prompt_stop_server.h"
#include "server/collected_reply.h"
#include "server/compat_routes.h"
#include "server/generation.h"
#include "server/listen_backlog.h"
#include "server/webui.h"

namespace tandem::server {
namespace {

std::optional<std::string> header(const httplib::Request& req, const char* name) {
  if (!req.has_header(name)) return std::nullopt;
  return req.get_header_value(name);
}

// httplib matches route patterns as regular expressions; a file name's '.' must match only itself.
std::string exact_route(std::string_view path) {
  std::string pattern;
  for (char c : path) {
    if (std::string_view(".[]{}()*+?^$|\\").find(c) != std::string_view::npos) pattern += '\\';
    pattern += c;
  }
  return pattern;
}

}  // namespace

HttpServer::HttpServer(Service& service, HttpOptions options)
    : service_(service), options_(std::move(options)), http_(std::make_unique<PromptStopServer>()) {
  const int threads = options_.worker_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(service_.max_body_bytes());
  // Keep-alive: clients (undici, the openai client) reuse connections; closing
  // one after a few requests races with a reuse and fails that request. The
  // idle timeout stays at 5 s, above undici's 4 s; it does not delay shutdown:
  // stop() ends idle connections at once (prompt_stop_server.h).
  http_->set_keep_alive_max_count(100000);
  http_->set_keep_alive_timeout(5);
  static_cast<PromptStopServer&>(*http_).set_request_deadline(options_.request_grace_ms,
                                                              options_.request_min_bytes_per_s);
  if (options_.timeout_s > 0) {
    http_->set_read_timeout(options_.timeout_s, 0);
    http_->set_write_timeout(options_.timeout_s, 0);
  }
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let
  // a second server silently share a port that is already in use.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const char*>(&yes), sizeof(yes));
  });
  install_routes();
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
  } else {
    port_ = http_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0)
    return io_error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                    " (address in use, or not an address of this machine)");
  // httplib listens with a backlog of 5: a burst of clients would wait a second for a SYN retry.
  if (raise_listen_backlog(port_) == 0)
    spdlog::warn("could not raise the accept queue of port {} (bursts of new connections may wait ~1 s)",
                 port_);
  return Status::Ok();
}

void HttpServer::run() {
  // stop() before this point (a load that fails at once) must not leave the loop running:
  // cpp-httplib's stop() does nothing until listening has begun (see stop()).
  run_entered_.store(true);
  if (!stop_requested_.load()) http_->listen_after_bind();
  run_exited_.store(true);
}

void HttpServer::stop() {
  if (!http_) return;
  stop_requested_.store(true);
  // run() has begun and will listen: wait until it does, so that the stop reaches it.
  while (run_entered_.load() && !run_exited_.load() && !http_->is_running()) std::this_thread::yield();
  static_cast<PromptStopServer&>(*http_).stop_waiting();
  http_->stop();
}

void HttpServer::install_routes() {
  Service& svc = service_;
  const bool webui = options_.webui;
  const CorsPolicy cors(options_.cors_origins);
  const bool preflight_public = cors.enabled();
  http_->set_pre_routing_handler(
      [&svc, webui, preflight_public](const httplib::Request& req, httplib::Response& res) {
        // A browser's CORS preflight carries no credentials; it is answered without them.
        if (req.path == "/health" || !svc.keys().enabled() || (preflight_public && req.method == "OPTIONS"))
          return httplib::Server::HandlerResponse::Unhandled;
        // The page's own files hold no data: a browser must load the page to be asked for the key.
        if (webui && (req.method == "GET" || req.method == "HEAD") && find_webui_asset(req.path))
          return httplib::Server::HandlerResponse::Unhandled;
        if (svc.keys().allows(header(req, "Authorization"), header(req, "X-Api-Key")))
          return httplib::Server::HandlerResponse::Unhandled;
        write_reply(res, error_reply(unauthorized()));
        return httplib::Server::HandlerResponse::Handled;
      });
  // Replies httplib makes on its own (413, 404, 400 on a broken request line) get the OpenAI shape.
  http_->set_error_handler([&svc](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int64_t chunked_sent = PromptStopServer::request_over_limit();
    if (res.status == 413 || chunked_sent > 0) {
      // httplib refuses a Content-Length past the limit (413; the size comes from the header), and a
      // chunked body fails its read at PromptStopServer's cap (the size is what had arrived).
      size_t sent = static_cast<size_t>(chunked_sent);
      if (res.status == 413 && req.has_header("Content-Length"))
        sent = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
      write_reply(res, error_reply(payload_too_large(sent, svc.max_body_bytes())));
      res.set_header("Connection",
                     "close");  // what is left of the body is discarded, then the connection ends
    } else if (res.status == 404) {
      write_reply(res, error_reply(route_not_found(req.method, req.path)));
    } else {
      write_reply(res, error_reply({res.status, "invalid_request_error",
                                    "HTTP error " + std::to_string(res.status), std::nullopt, "http_error"}));
    }
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("request handler threw: {}", what);
    write_reply(
        res, error_reply({500, "server_error", "internal error: " + what, std::nullopt, "internal_error"}));
  });

  http_->Get("/health",
             [&svc](const httplib::Request&, httplib::Response& res) { write_reply(res, svc.health()); });
  http_->Get("/v1/models",
             [&svc](const httplib::Request&, httplib::Response& res) { write_reply(res, svc.models()); });
  http_->Get("/metrics",
             [&svc](const httplib::Request&, httplib::Response& res) { write_reply(res, svc.metrics()); });
  http_->Get("/v1/internal/mtp-policy",
             [&svc](const httplib::Request&, httplib::Response& res) { write_reply(res, svc.mtp_policy()); });

  auto generate = [&svc](Endpoint endpoint) {
    return [&svc, endpoint](const httplib::Request& req, httplib::Response& res) {
      auto started = svc.start_generation(endpoint, req.body);
      if (auto* err = std::get_if<ApiError>(&started)) {
        write_reply(res, error_reply(*err));
        return;
      }
      std::shared_ptr<GenerationRun> run = std::move(std::get<std::unique_ptr<GenerationRun>>(started));
      if (!run->stream()) {
        // Collected here, before anything is sent, so an error's status is the
        // HTTP status; a client that goes away meanwhile cancels the run.
        answer_collected(req, res,
                         [&run](const std::function<bool()>& alive) { return run->collect(alive); });
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      stream_response(
          req, res, "text/event-stream",
          [run](size_t, httplib::DataSink& sink) {
            run->pump(
                [&sink](const std::string& event) {
                  return sink.is_writable() && sink.write(event.data(), event.size());
                },
                [&sink] { return sink.is_writable(); });
            sink.done();
            return true;
          },
          [run](bool) { run->cancel(); });
    };
  };
  // A known path with the wrong method: 405 in the OpenAI shape, not httplib's bare 400/404.
  auto wrong_method = [](const char* allowed) {
    return [allowed](const httplib::Request& req, httplib::Response& res) {
      write_reply(res, error_reply({405, "invalid_request_error",
                                    req.method + " is not allowed on " + req.path + "; use " + allowed,
                                    std::nullopt, "method_not_allowed"}));
      res.set_header("Allow", allowed);
    };
  };
  for (const char* path : {"/health", "/v1/models", "/metrics", "/v1/internal/mtp-policy"}) {
    http_->Post(path, wrong_method("GET"));
    http_->Put(path, wrong_method("GET"));
    http_->Delete(path, wrong_method("GET"));
  }
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/completions", "/chat/completions"}) {
    http_->Get(path, wrong_method("POST"));
    http_->Put(path, wrong_method("POST"));
    http_->Delete(path, wrong_method("POST"));
  }
  http_->Post("/v1/completions", generate(Endpoint::completions));
  http_->Post("/v1/chat/completions", generate(Endpoint::chat_completions));
  http_->Post("/completions", generate(Endpoint::completions));
  http_->Post("/chat/completions", generate(Endpoint::chat_completions));
  if (options_.webui) {
    install_webui_routes();
    for (const WebAsset& asset : webui_assets()) {
      const std::string path = exact_route(asset.path);
      http_->Post(path, wrong_method("GET"));
      http_->Put(path, wrong_method("GET"));
      http_->Delete(path, wrong_method("GET"));
    }
  }
  auto* server = static_cast<PromptStopServer*>(http_.get());
  install_compat_routes(*http_, svc, {options_.timeout_s, [server] { return server->stopping(); }});
  install_cors(*http_, cors);
}

void HttpServer::install_webui_routes() {
  for (const WebAsset& asset : webui_assets()) {
    http_->Get(exact_route(asset.path), [&asset](const httplib::Request& req, httplib::Response& res) {
      const WebReply reply = webui_reply(asset, header(req, "If-None-Match"));
      res.status = reply.status;
      for (const auto& [name, value] : reply.headers) res.set_header(name, value);
      if (reply.status == 200)
        res.set_content(reply.body.data(), reply.body.size(), std::string(reply.content_type));
    });
  }
}

}  // namespace tandem::server
