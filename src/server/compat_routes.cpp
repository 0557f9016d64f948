#include "server/compat_routes.h"

#include <httplib.h>

#include <chrono>
#include <memory>

#include "server/collected_reply.h"
#include "server/embeddings_api.h"
#include "server/generation.h"
#include "server/llama_api.h"
#include "server/ollama_api.h"

namespace tandem::server {

using nlohmann::json;

void write_reply(httplib::Response& res, const HttpReply& reply) {
  res.status = reply.status;
  res.set_content(reply.body, reply.content_type.c_str());
}

void stream_response(const httplib::Request& req, httplib::Response& res, const char* content_type,
                     std::function<bool(size_t, httplib::DataSink&)> provider,
                     std::function<void(bool)> done) {
  if (req.version == "HTTP/1.0") {
    // The end of the body is the end of the connection; httplib says so itself unless the
    // client asked for keep-alive.
    if (req.has_header("Connection") && req.get_header_value("Connection") != "close")
      res.set_header("Connection", "close");
    res.set_content_provider(content_type, std::move(provider), std::move(done));
  } else {
    res.set_chunked_content_provider(content_type, std::move(provider), std::move(done));
  }
}

namespace {

using RunPtr = std::shared_ptr<GenerationRun>;

// The error a run ended with, as {status, OpenAI error body}.
std::pair<int, std::string> run_error(const GenerationRun& run) {
  const ApiError e = run.error_of(run.choices().front());
  return {e.http_status, error_body(e)};
}

bool failed(const GenerationRun& run) {
  return run.choices().front().finish == scheduler::FinishReason::error;
}

// Streams `run` through `sink` as `content_type` events: chunk(text) for each
// piece of text, then last() (or an error event); `frame` wraps an object.
void stream_run(const httplib::Request& req, httplib::Response& res, RunPtr run, const char* content_type,
                std::function<std::string(const json&)> frame, std::function<json(const std::string&)> chunk,
                std::function<json()> last, std::function<json()> error) {
  res.set_header("Cache-Control", "no-cache");
  stream_response(
      req, res, content_type,
      [run, frame, chunk, last, error](size_t, httplib::DataSink& sink) {
        auto write = [&](const json& j) {
          const std::string event = frame(j);
          return sink.is_writable() && sink.write(event.data(), event.size());
        };
        if (run->stream_text([&](const std::string& text) { return write(chunk(text)); },
                             [&sink] { return sink.is_writable(); }))
          write(failed(*run) ? error() : last());
        sink.done();
        return true;
      },
      [run](bool) { run->cancel(); });
}

std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }
std::string ndjson(const json& j) { return dump_json(j) + "\n"; }

void llama_completion(Service& svc, const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_llama_completion(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return write_reply(res, error_reply(*e));
  auto started = svc.start_request(std::move(std::get<GenerationRequest>(parsed)));
  if (auto* e = std::get_if<ApiError>(&started)) return write_reply(res, error_reply(*e));
  RunPtr run = std::move(std::get<std::unique_ptr<GenerationRun>>(started));
  const std::string model = svc.model_id();
  if (!run->stream()) {
    answer_collected(req, res, [&](const std::function<bool()>& alive) -> std::pair<int, std::string> {
      if (!run->wait(alive)) return {499, ""};
      if (failed(*run)) return run_error(*run);
      return {200, dump_json(llama_completion_json(*run, model, false))};
    });
    return;
  }
  GenerationRun* r = run.get();
  stream_run(
      req, res, run, "text/event-stream", sse,
      [r](const std::string& text) {
        return llama_chunk_json(*r, text, static_cast<int64_t>(r->choices().front().tokens.size()));
      },
      [r, model] { return llama_completion_json(*r, model, true); },
      [r] { return json::parse(run_error(*r).second); });
}

void ollama_generation(Service& svc, OllamaEndpoint endpoint, const httplib::Request& req,
                       httplib::Response& res) {
  const auto t0 = std::chrono::steady_clock::now();
  auto parsed = parse_ollama_request(endpoint, req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return write_reply(res, ollama_error(*e));
  OllamaRequest o = std::move(std::get<OllamaRequest>(parsed));
  if (!svc.ready())
    return write_reply(res, ollama_error(unavailable("the model is still loading; GET /health says when")));
  if (!svc.model_matches(o.model))
    return write_reply(res, ollama_error({404, "invalid_request_error", "model '" + o.model + "' not found",
                                          std::string("model"), "model_not_found"}));
  const std::string model = o.model.empty() ? svc.model_id() : o.model;
  if (o.load_only)
    return write_reply(res, {200, "application/json", dump_json(ollama_load_json(endpoint, model))});
  // /api/generate without a chat template: the prompt goes in as it is.
  if (endpoint == OllamaEndpoint::generate && !svc.served().chat_template)
    o.generation.endpoint = Endpoint::completions;
  auto started = svc.start_request(std::move(o.generation));
  if (auto* e = std::get_if<ApiError>(&started)) return write_reply(res, ollama_error(*e));
  RunPtr run = std::move(std::get<std::unique_ptr<GenerationRun>>(started));
  // The run's error (a dead end names its field, as on the OpenAI routes) in Ollama's shape.
  auto run_error_of = [](const GenerationRun& r) { return r.error_of(r.choices().front()); };
  if (!run->stream()) {
    answer_collected(req, res, [&](const std::function<bool()>& alive) -> std::pair<int, std::string> {
      if (!run->wait(alive)) return {499, ""};
      if (failed(*run)) {
        const HttpReply e = ollama_error(run_error_of(*run));
        return {e.status, e.body};
      }
      return {200, dump_json(ollama_final_json(endpoint, model, *run, run->choices().front().text, t0))};
    });
    return;
  }
  GenerationRun* r = run.get();
  stream_run(
      req, res, run, "application/x-ndjson", ndjson,
      [endpoint, model](const std::string& text) { return ollama_chunk_json(endpoint, model, text); },
      [endpoint, model, r, t0] { return ollama_final_json(endpoint, model, *r, "", t0); },
      [r, run_error_of] { return ollama_error_json(run_error_of(*r)); });
}

}  // namespace

void install_compat_routes(httplib::Server& http, Service& service, EmbedLimits embed_limits) {
  Service& svc = service;
  auto body_route = [&svc](HttpReply (*fn)(const Service&, const std::string&)) {
    return [&svc, fn](const httplib::Request& req, httplib::Response& res) {
      write_reply(res, fn(svc, req.body));
    };
  };
  // llama-server's native routes.
  http.Post("/tokenize", body_route(llama_tokenize));
  http.Post("/detokenize", body_route(llama_detokenize));
  http.Post("/apply-template", body_route(llama_apply_template));
  http.Get("/props",
           [&svc](const httplib::Request&, httplib::Response& res) { write_reply(res, llama_props(svc)); });
  http.Get("/slots", [&svc](const httplib::Request& req, httplib::Response& res) {
    const std::string fail = req.has_param("fail_on_no_slot") ? req.get_param_value("fail_on_no_slot") : "";
    write_reply(res, llama_slots(svc, fail == "1" || fail == "true"));
  });
  http.Post("/completion",
            [&svc](const httplib::Request& req, httplib::Response& res) { llama_completion(svc, req, res); });
  // OpenAI.
  http.Get(R"(/v1/models/(.+))", [&svc](const httplib::Request& req, httplib::Response& res) {
    write_reply(res, svc.model(req.matches[1].str()));
  });
  // Embeddings run on this worker (embedder.h); a client that leaves, --timeout or a stop ends them.
  auto embed_route = [&svc, embed_limits](auto answer) {
    return [&svc, embed_limits, answer](const httplib::Request& req, httplib::Response& res) {
      EmbedWatch watch{client_connected(req), std::nullopt, embed_limits.server_stopping};
      if (embed_limits.timeout_s > 0)
        watch.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(embed_limits.timeout_s);
      write_reply(res, answer(svc, req.body, watch));
      if (res.status == 499) res.set_header("Connection", "close");
    };
  };
  auto openai_embed = [](const Service& s, const std::string& body, const EmbedWatch& w) {
    return openai_embeddings(s, body, w);
  };
  http.Post("/v1/embeddings", embed_route(openai_embed));
  http.Post("/embeddings", embed_route(openai_embed));
  // Ollama.
  http.Get("/api/version",
           [](const httplib::Request&, httplib::Response& res) { write_reply(res, ollama_version()); });
  http.Get("/api/tags",
           [&svc](const httplib::Request&, httplib::Response& res) { write_reply(res, ollama_tags(svc)); });
  http.Get("/api/ps",
           [&svc](const httplib::Request&, httplib::Response& res) { write_reply(res, ollama_ps(svc)); });
  http.Post("/api/show", body_route(ollama_show));
  http.Post("/api/embed", embed_route([](const Service& s, const std::string& body, const EmbedWatch& w) {
              return ollama_embed(s, body, false, w);
            }));
  http.Post("/api/embeddings",
            embed_route([](const Service& s, const std::string& body, const EmbedWatch& w) {
              return ollama_embed(s, body, true, w);
            }));
  http.Post("/api/generate", [&svc](const httplib::Request& req, httplib::Response& res) {
    ollama_generation(svc, OllamaEndpoint::generate, req, res);
  });
  http.Post("/api/chat", [&svc](const httplib::Request& req, httplib::Response& res) {
    ollama_generation(svc, OllamaEndpoint::chat, req, res);
  });
  // A known path with the wrong method: 405 naming the right one, as on the OpenAI routes.
  auto wrong_method = [](const char* allowed) {
    return [allowed](const httplib::Request& req, httplib::Response& res) {
      write_reply(res, error_reply({405, "invalid_request_error",
                                    req.method + " is not allowed on " + req.path + "; use " + allowed,
                                    std::nullopt, "method_not_allowed"}));
      res.set_header("Allow", allowed);
    };
  };
  for (const char* path : {"/tokenize", "/detokenize", "/apply-template", "/completion", "/v1/embeddings",
                           "/api/show", "/api/generate", "/api/chat", "/api/embed"})
    http.Get(path, wrong_method("POST"));
  for (const char* path : {"/props", "/slots", "/api/version", "/api/tags", "/api/ps"})
    http.Post(path, wrong_method("GET"));
}

CorsPolicy::CorsPolicy(const std::vector<std::string>& origins) {
  for (const std::string& entry : origins) {
    size_t start = 0;
    while (start <= entry.size()) {
      size_t comma = entry.find(',', start);
      if (comma == std::string::npos) comma = entry.size();
      std::string origin = entry.substr(start, comma - start);
      while (!origin.empty() && origin.front() == ' ') origin.erase(origin.begin());
      while (!origin.empty() && origin.back() == ' ') origin.pop_back();
      if (origin == "*")
        any_ = true;
      else if (!origin.empty())
        origins_.push_back(origin);
      start = comma + 1;
    }
  }
}

std::string CorsPolicy::allow_origin(const std::string& origin) const {
  if (any_) return "*";
  for (const auto& o : origins_)
    if (o == origin) return origin;
  return "";
}

void install_cors(httplib::Server& http, const CorsPolicy& policy) {
  if (!policy.enabled()) return;
  http.set_post_routing_handler([policy](const httplib::Request& req, httplib::Response& res) {
    if (!req.has_header("Origin")) return;
    const std::string allow = policy.allow_origin(req.get_header_value("Origin"));
    if (allow.empty()) return;
    res.set_header("Access-Control-Allow-Origin", allow);
    if (allow != "*") res.set_header("Vary", "Origin");
  });
  http.Options(R"(.*)", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
    res.set_header("Access-Control-Max-Age", "86400");
  });
}

}  // namespace tandem::server
