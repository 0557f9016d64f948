#include "server/ollama_api.h"

#include <cstdio>
#include <ctime>
#include <limits>

#include "server/generation.h"
#include "server/request_fields.h"

namespace tandem::server {

using nlohmann::json;

namespace {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  const time_t secs = static_cast<time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ns % 1000000000));
  return buf;
}

std::string now_rfc3339() { return rfc3339(std::chrono::system_clock::now()); }

// "15.7M", "494.0M", "7.6B": Ollama's parameter_size.
std::string parameter_size(int64_t n) {
  char buf[32];
  if (n >= 1000000000)
    std::snprintf(buf, sizeof(buf), "%.1fB", static_cast<double>(n) / 1e9);
  else
    std::snprintf(buf, sizeof(buf), "%.1fM", static_cast<double>(n) / 1e6);
  return buf;
}

const char* quantization_level(kernels::DType d) {
  switch (d) {
    case kernels::DType::bf16:
      return "BF16";
    case kernels::DType::f16:
      return "F16";
    default:
      return "F32";
  }
}

json details(const ServedModel& m) {
  const model::ModelConfig& c = m.engine->target().config();
  return {{"parent_model", ""},
          {"format", "safetensors"},
          {"family", c.model_type},
          {"families", json::array({c.model_type})},
          {"parameter_size", parameter_size(m.engine->target().parameter_count())},
          {"quantization_level", quantization_level(c.declared_dtype)}};
}

json model_entry(const Service& svc) {
  const ServedModel& m = svc.served();
  return {
      {"name", svc.model_id()},
      {"model", svc.model_id()},
      {"modified_at", rfc3339(std::chrono::system_clock::from_time_t(static_cast<time_t>(svc.created())))},
      {"size", static_cast<int64_t>(m.engine->target().weight_bytes_per_token())},
      {"details", details(m)}};
}

std::variant<const ServedModel*, ApiError> ready_model(const Service& svc) {
  if (!svc.ready()) return unavailable("the model is still loading; GET /health says when it is ready");
  return &svc.served();
}

HttpReply json_reply(const json& body) { return {200, "application/json", dump_json(body)}; }

ApiError ollama_model_not_found(const std::string& name) {
  return {404, "invalid_request_error", "model '" + name + "' not found", std::string("model"),
          "model_not_found"};
}

}  // namespace

json ollama_error_json(const ApiError& error) {
  std::string message = error.message;
  // Ollama's body has no `param`: a dead end names the field in the message instead.
  if (error.code == "no_allowed_token" && error.param) message += " (param: " + *error.param + ")";
  return {{"error", message}};
}

HttpReply ollama_error(const ApiError& error) {
  return {error.http_status, "application/json", dump_json(ollama_error_json(error))};
}

HttpReply ollama_version() { return json_reply({{"version", TANDEM_VERSION}}); }

HttpReply ollama_tags(const Service& svc) {
  if (!svc.ready()) return json_reply({{"models", json::array()}});
  return json_reply({{"models", json::array({model_entry(svc)})}});
}

HttpReply ollama_ps(const Service& svc) {
  if (!svc.ready()) return json_reply({{"models", json::array()}});
  json entry = model_entry(svc);
  entry["expires_at"] = "2318-01-01T00:00:00Z";  // never unloaded while the server runs
  entry["size_vram"] = 0;
  entry["context_length"] = svc.served().engine->context();
  return json_reply({{"models", json::array({entry})}});
}

HttpReply ollama_show(const Service& svc, const std::string& body) {
  auto m = ready_model(svc);
  if (auto* e = std::get_if<ApiError>(&m)) return ollama_error(*e);
  const ServedModel& served = *std::get<const ServedModel*>(m);
  auto parsed = fields::parse_json_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return ollama_error(*e);
  const json& b = std::get<json>(parsed);
  auto reply = fields::catch_field_errors<HttpReply>([&] {
    // "model", or the older "name".
    std::string name = fields::string(b, "model").value_or(fields::string(b, "name").value_or(""));
    if (name.empty()) fields::fail("model", "'model' is required");
    if (!svc.model_matches(name)) return ollama_error(ollama_model_not_found(name));
    const model::ModelConfig& c = served.engine->target().config();
    const std::string arch = c.model_type;
    json info = {{"general.architecture", arch},
                 {"general.parameter_count", served.engine->target().parameter_count()},
                 {arch + ".context_length", served.engine->context()},
                 {arch + ".embedding_length", c.hidden_size},
                 {arch + ".feed_forward_length", c.intermediate_size},
                 {arch + ".block_count", c.num_layers},
                 {arch + ".attention.head_count", c.num_heads},
                 {arch + ".attention.head_count_kv", c.num_kv_heads},
                 {arch + ".vocab_size", c.vocab_size}};
    json capabilities = json::array({"completion"});
    if (svc.embedder()) capabilities.push_back("embedding");
    const std::string tmpl = served.chat_template ? served.chat_template->source() : "";
    return json_reply(
        {{"modelfile", "# served by tandem from a Hugging Face directory\nFROM " + svc.model_path() + "\n"},
         {"parameters", ""},
         {"template", tmpl},
         {"details", details(served)},
         {"model_info", info},
         {"capabilities", capabilities},
         {"modified_at", model_entry(svc)["modified_at"]}});
  });
  if (auto* e = std::get_if<ApiError>(&reply)) return ollama_error(*e);
  return std::get<HttpReply>(reply);
}

json ollama_chunk_json(OllamaEndpoint endpoint, const std::string& model, const std::string& text) {
  json j = {{"model", model}, {"created_at", now_rfc3339()}};
  if (endpoint == OllamaEndpoint::chat)
    j["message"] = {{"role", "assistant"}, {"content", text}};
  else
    j["response"] = text;
  j["done"] = false;
  return j;
}

json ollama_final_json(OllamaEndpoint endpoint, const std::string& model, const GenerationRun& run,
                       const std::string& text, std::chrono::steady_clock::time_point started) {
  const GenerationRun::Choice& c = run.choices().front();
  json j = ollama_chunk_json(endpoint, model, text);
  const auto total =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
  const char* reason = c.finish == scheduler::FinishReason::length ? "length" : "stop";
  j["done"] = true;
  j["done_reason"] = reason;
  j["total_duration"] = static_cast<int64_t>(total.count());
  j["load_duration"] = 0;
  j["prompt_eval_count"] = run.prompt_tokens();
  j["prompt_eval_duration"] = static_cast<int64_t>(c.stats.prompt_ms * 1e6);
  j["eval_count"] = static_cast<int64_t>(c.tokens.size());
  j["eval_duration"] = static_cast<int64_t>(c.stats.decode_ms * 1e6);
  return j;
}

json ollama_load_json(OllamaEndpoint endpoint, const std::string& model) {
  json j = ollama_chunk_json(endpoint, model, "");
  j["done"] = true;
  j["done_reason"] = "load";
  return j;
}

}  // namespace tandem::server
