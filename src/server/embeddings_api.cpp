#include "server/embeddings_api.h"

#include <cstring>
#include <limits>

#include "server/embedder.h"
#include "server/generation.h"
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
  for (const auto& t : v) {
    if (t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
      fields::fail("input", "'" + where + "' holds token id " + t.dump() + ", outside the vocabulary");
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

// The inputs as token ids, in order.
std::vector<std::vector<int32_t>> inputs_of(const json& body, const ServedModel& m) {
  const json* v = fields::find(body, "input");
  if (!v) fields::fail("input", "'input' is required");
  const int64_t vocab = m.engine->target().config().vocab_size;
  auto text = [&](const json& s, const std::string& where) {
    if (!m.tokenizer) fields::fail("input", "this model directory has no tokenizer.json: send token ids");
    if (s.get<std::string>().empty()) fields::fail("input", "'" + where + "' must not be empty");
    return m.tokenizer->encode(s.get<std::string>(), true);
  };
  std::vector<std::vector<int32_t>> inputs;
  if (v->is_string()) {
    inputs.push_back(text(*v, "input"));
  } else if (is_token_array(*v)) {
    inputs.push_back(token_ids(*v, "input", vocab));
  } else if (v->is_array() && !v->empty()) {
    for (size_t i = 0; i < v->size(); ++i) {
      const json& item = (*v)[i];
      const std::string where = "input[" + std::to_string(i) + "]";
      if (item.is_string())
        inputs.push_back(text(item, where));
      else if (is_token_array(item))
        inputs.push_back(token_ids(item, where, vocab));
      else
        fields::fail("input", "'" + where + "' must be a non-empty string or a non-empty array of token ids");
    }
  } else {
    fields::fail("input",
                 "'input' must be a string, an array of strings, an array of token ids or an array of "
                 "token-id arrays, got " +
                     std::string(fields::type_name(*v)));
  }
  return inputs;
}

}  // namespace

HttpReply openai_embeddings(const Service& svc, const std::string& body) {
  if (!svc.ready())
    return error_reply(unavailable("the model is still loading; GET /health says when it is ready"));
  Embedder* embedder = svc.embedder();
  if (!embedder)
    return error_reply({501, "not_supported_error",
                        "This server does not support embeddings. Start it with `--embeddings`", std::nullopt,
                        "not_supported"});
  auto parsed = fields::parse_json_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_reply(*e);
  const json& b = std::get<json>(parsed);
  auto reply = fields::catch_field_errors<HttpReply>([&] {
    const std::string model = fields::string(b, "model").value_or("");
    if (!svc.model_matches(model)) return error_reply(model_not_found(model));
    const std::string format = fields::string(b, "encoding_format").value_or("float");
    if (format != "float" && format != "base64")
      fields::fail("encoding_format",
                   "'encoding_format' must be \"float\" or \"base64\", got \"" + format + "\"");
    if (auto d = fields::integer(b, "dimensions", 1, std::numeric_limits<int32_t>::max());
        d && *d != embedder->dimensions())
      fields::fail("dimensions", "'dimensions' must be the model's " +
                                     std::to_string(embedder->dimensions()) + " (vectors are not truncated)");
    const auto inputs = inputs_of(b, svc.served());
    int64_t tokens = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      tokens += static_cast<int64_t>(inputs[i].size());
      if (static_cast<int64_t>(inputs[i].size()) > embedder->max_tokens())
        return error_reply({400, "invalid_request_error",
                            "input[" + std::to_string(i) + "] has " + std::to_string(inputs[i].size()) +
                                " tokens; the context holds " + std::to_string(embedder->max_tokens()),
                            std::string("input"), "context_length_exceeded"});
    }
    auto vectors = embedder->embed(inputs);
    if (!vectors.ok()) return error_reply(from_status(vectors.status(), "input"));
    json data = json::array();
    for (size_t i = 0; i < vectors->size(); ++i) {
      const std::vector<float>& v = (*vectors)[i];
      json embedding;
      if (format == "base64") {
        // float32 little-endian, the byte order of every machine tandem builds for (x86-64).
        embedding = base64_encode(reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(float));
      } else {
        embedding = v;
      }
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
    }
    return HttpReply{200, "application/json",
                     dump_json({{"object", "list"},
                                {"data", data},
                                {"model", svc.model_id()},
                                {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}})};
  });
  if (auto* e = std::get_if<ApiError>(&reply)) return error_reply(*e);
  return std::get<HttpReply>(reply);
}

}  // namespace tandem::server
