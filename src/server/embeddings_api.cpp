#include "server/embeddings_api.h"

#include <chrono>
#include <cstring>
#include <limits>

#include "server/embedder.h"
#include "server/generation.h"
#include "server/ollama_api.h"
#include "server/request_fields.h"

namespace tandem::server {

using nlohmann::json;

std::string base64_encode(const unsigned char* bytes, size_t size) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    const uint32_t b0 = bytes[i], b1 = i + 1 < size ? bytes[i + 1] : 0, b2 = i + 2 < size ? bytes[i + 2] : 0;
    const uint32_t v = (b0 << 16) | (b1 << 8) | b2;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[v & 63] : '=';
  }
  return out;
}

namespace {

bool is_token_array(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const auto& t : v)
    if (!t.is_number_integer()) return false;
  return true;
}

std::vector<int32_t> token_ids(const json& v, const std::string& where, int64_t vocab) {
  std::vector<int32_t> ids;
  const std::string field = where.substr(0, where.find('['));
  for (const auto& t : v) {
    if (t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
      fields::fail(field, "'" + where + "' holds token id " + t.dump() + ", outside the vocabulary");
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

// The inputs as token ids, in order.
std::vector<std::vector<int32_t>> inputs_of(const json& body, const ServedModel& m,
                                            const std::string& field) {
  const json* v = fields::find(body, field.c_str());
  if (!v) fields::fail(field, "'" + field + "' is required");
  const int64_t vocab = m.engine->target().config().vocab_size;
  auto text = [&](const json& s, const std::string& where) {
    if (!m.tokenizer) fields::fail(field, "this model directory has no tokenizer.json: send token ids");
    if (s.get<std::string>().empty()) fields::fail(field, "'" + where + "' must not be empty");
    return m.tokenizer->encode(s.get<std::string>(), true);
  };
  std::vector<std::vector<int32_t>> inputs;
  if (v->is_string()) {
    inputs.push_back(text(*v, field));
  } else if (is_token_array(*v)) {
    inputs.push_back(token_ids(*v, field, vocab));
  } else if (v->is_array() && !v->empty()) {
    if (v->size() > kMaxEmbeddingInputs)
      fields::fail(field, "'" + field + "' holds " + std::to_string(v->size()) + " inputs; at most " +
                              std::to_string(kMaxEmbeddingInputs) + " per request");
    for (size_t i = 0; i < v->size(); ++i) {
      const json& item = (*v)[i];
      const std::string where = field + "[" + std::to_string(i) + "]";
      if (item.is_string())
        inputs.push_back(text(item, where));
      else if (is_token_array(item))
        inputs.push_back(token_ids(item, where, vocab));
      else
        fields::fail(field, "'" + where + "' must be a non-empty string or a non-empty array of token ids");
    }
  } else {
    fields::fail(field,
                 "'input' must be a string, an array of strings, an array of token ids or an array of "
                 "token-id arrays, got " +
                     std::string(fields::type_name(*v)));
  }
  return inputs;
}

struct Embedded {
  std::vector<std::vector<float>> vectors;
  int64_t tokens = 0;
};

// The checks every embeddings route shares, then the forward: `field` holds the inputs.
// FieldErrors propagate to the caller's catch_field_errors.
std::variant<Embedded, ApiError> embed_body(const Service& svc, const json& b, const std::string& field,
                                            const EmbedWatch& watch) {
  if (!svc.ready()) return unavailable("the model is still loading; GET /health says when it is ready");
  Embedder* embedder = svc.embedder();
  if (!embedder)
    return ApiError{501, "not_supported_error",
                    "This server does not support embeddings. Start it with `--embeddings`", std::nullopt,
                    "not_supported"};
  const std::string model = fields::string(b, "model").value_or("");
  if (!svc.model_matches(model)) return model_not_found(model);
  if (auto d = fields::integer(b, "dimensions", 1, std::numeric_limits<int32_t>::max());
      d && *d != embedder->dimensions())
    fields::fail("dimensions", "'dimensions' must be the model's " + std::to_string(embedder->dimensions()) +
                                   " (vectors are not truncated)");
  Embedded out;
  const auto inputs = inputs_of(b, svc.served(), field);
  for (size_t i = 0; i < inputs.size(); ++i) {
    out.tokens += static_cast<int64_t>(inputs[i].size());
    if (static_cast<int64_t>(inputs[i].size()) > embedder->max_tokens())
      return ApiError{400, "invalid_request_error",
                      field + "[" + std::to_string(i) + "] has " + std::to_string(inputs[i].size()) +
                          " tokens; the context holds " + std::to_string(embedder->max_tokens()),
                      field, "context_length_exceeded"};
  }
  enum class Stop { none, client_left, deadline, server_stopping } stop = Stop::none;
  auto keep_going = [&] {
    if (watch.client_connected && !watch.client_connected())
      stop = Stop::client_left;
    else if (watch.deadline && std::chrono::steady_clock::now() >= *watch.deadline)
      stop = Stop::deadline;
    else if (watch.server_stopping && watch.server_stopping())
      stop = Stop::server_stopping;
    return stop == Stop::none;
  };
  auto vectors = embedder->embed(inputs, keep_going);
  if (!vectors.ok() && stop != Stop::none) {
    const std::string progress = vectors.status().message();
    if (stop == Stop::client_left)
      return ApiError{499, "invalid_request_error", "the client closed the connection; " + progress,
                      std::nullopt, "client_closed"};
    if (stop == Stop::deadline)
      return ApiError{503, "server_error",
                      "the embeddings request ran past the server's timeout (-to/--timeout); " + progress,
                      std::nullopt, "timeout"};
    return unavailable("the server is shutting down; " + progress);
  }
  if (!vectors.ok()) return from_status(vectors.status(), field);
  out.vectors = std::move(*vectors);
  return out;
}

// Parses `body` and runs `reply(parsed)`; errors become `error(ApiError)` replies.
template <typename Reply, typename ErrorReply>
HttpReply with_json(const std::string& body, Reply&& reply, ErrorReply&& error) {
  auto parsed = fields::parse_json_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  auto result = fields::catch_field_errors<HttpReply>([&] { return reply(std::get<json>(parsed)); });
  if (auto* e = std::get_if<ApiError>(&result)) return error(*e);
  return std::get<HttpReply>(result);
}

}  // namespace

HttpReply openai_embeddings(const Service& svc, const std::string& body, const EmbedWatch& watch) {
  return with_json(
      body,
      [&](const json& b) {
        const std::string format = fields::string(b, "encoding_format").value_or("float");
        if (format != "float" && format != "base64")
          fields::fail("encoding_format",
                       "'encoding_format' must be \"float\" or \"base64\", got \"" + format + "\"");
        auto embedded = embed_body(svc, b, "input", watch);
        if (auto* e = std::get_if<ApiError>(&embedded)) return error_reply(*e);
        const Embedded& r = std::get<Embedded>(embedded);
        json data = json::array();
        for (size_t i = 0; i < r.vectors.size(); ++i) {
          const std::vector<float>& v = r.vectors[i];
          json embedding;
          if (format == "base64") {
            // float32 little-endian, the byte order of every machine tandem builds for (x86-64).
            embedding =
                base64_encode(reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(float));
          } else {
            embedding = v;
          }
          data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
        }
        return HttpReply{200, "application/json",
                         dump_json({{"object", "list"},
                                    {"data", data},
                                    {"model", svc.model_id()},
                                    {"usage", {{"prompt_tokens", r.tokens}, {"total_tokens", r.tokens}}}})};
      },
      [](const ApiError& e) { return error_reply(e); });
}

HttpReply ollama_embed(const Service& svc, const std::string& body, bool legacy, const EmbedWatch& watch) {
  const auto t0 = std::chrono::steady_clock::now();
  return with_json(
      body,
      [&](const json& b) {
        auto embedded = embed_body(svc, b, legacy ? "prompt" : "input", watch);
        if (auto* e = std::get_if<ApiError>(&embedded)) return ollama_error(*e);
        const Embedded& r = std::get<Embedded>(embedded);
        if (legacy) return HttpReply{200, "application/json", dump_json({{"embedding", r.vectors.front()}})};
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
                .count();
        const std::string model = fields::string(b, "model").value_or("");
        return HttpReply{200, "application/json",
                         dump_json({{"model", model.empty() ? svc.model_id() : model},
                                    {"embeddings", r.vectors},
                                    {"total_duration", static_cast<int64_t>(ns)},
                                    {"load_duration", 0},
                                    {"prompt_eval_count", r.tokens}})};
      },
      ollama_error);
}

}  // namespace tandem::server
