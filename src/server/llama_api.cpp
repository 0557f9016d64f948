#include "server/llama_api.h"

#include "server/generation.h"
#include "server/request_fields.h"
#include "server/slot_board.h"

namespace tandem::server {

using nlohmann::json;

namespace {

HttpReply json_reply(const json& body) { return {200, "application/json", dump_json(body)}; }

std::variant<const ServedModel*, ApiError> ready_model(const Service& svc) {
  if (!svc.ready()) return unavailable("the model is still loading; GET /health says when it is ready");
  return &svc.served();
}

// Runs `build` on the parsed body; its FieldErrors become 400 replies.
template <typename F>
HttpReply with_body(const std::string& body, F&& build) {
  auto parsed = fields::parse_json_object(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_reply(*e);
  auto result = fields::catch_field_errors<HttpReply>([&] { return build(std::get<json>(parsed)); });
  if (auto* e = std::get_if<ApiError>(&result)) return error_reply(*e);
  return std::get<HttpReply>(result);
}

const tok::Tokenizer& require_tokenizer(const ServedModel& m, const char* field) {
  if (!m.tokenizer)
    throw fields::FieldError{
        bad_request(field, "this model directory has no tokenizer.json", "no_tokenizer")};
  return *m.tokenizer;
}

}  // namespace

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

HttpReply llama_tokenize(const Service& svc, const std::string& body) {
  auto m = ready_model(svc);
  if (auto* e = std::get_if<ApiError>(&m)) return error_reply(*e);
  const ServedModel& model = *std::get<const ServedModel*>(m);
  return with_body(body, [&](const json& b) {
    const tok::Tokenizer& tokenizer = require_tokenizer(model, "content");
    auto content = fields::string(b, "content");
    if (!content) fields::fail("content", "'content' is required");
    const bool add_special = fields::boolean(b, "add_special").value_or(false);
    const bool with_pieces = fields::boolean(b, "with_pieces").value_or(false);
    fields::boolean(b, "parse_special");  // type-checked; special tokens in the text are always parsed
    const std::vector<int32_t> ids = tokenizer.encode(*content, add_special);
    // Written as text token by token: a json tree of {"id", "piece"} objects took ~300 bytes a
    // token, so a 4 MB body of short words held 1.9 GB. The text is what dump() would write.
    std::string out = "{\"tokens\":[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ',';
      const int32_t id = ids[i];
      if (!with_pieces) {
        out += std::to_string(id);
        continue;
      }
      const int32_t one[1] = {id};
      const std::string piece = tokenizer.decode_raw(one);
      json entry = {{"id", id}, {"piece", piece}};
      if (!valid_utf8(piece)) {
        json bytes = json::array();
        for (unsigned char ch : piece) bytes.push_back(static_cast<int>(ch));
        entry["piece"] = std::move(bytes);
      }
      out += dump_json(entry);
    }
    out += "]}";
    return HttpReply{200, "application/json", std::move(out)};
  });
}

HttpReply llama_detokenize(const Service& svc, const std::string& body) {
  auto m = ready_model(svc);
  if (auto* e = std::get_if<ApiError>(&m)) return error_reply(*e);
  const ServedModel& model = *std::get<const ServedModel*>(m);
  return with_body(body, [&](const json& b) {
    const tok::Tokenizer& tokenizer = require_tokenizer(model, "tokens");
    const json* v = fields::find(b, "tokens");
    if (!v) fields::fail("tokens", "'tokens' is required");
    if (!v->is_array()) fields::fail("tokens", "'tokens' must be an array of token ids");
    const int64_t vocab = model.engine->target().config().vocab_size;
    std::vector<int32_t> ids;
    for (const auto& t : *v) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
        fields::fail("tokens", "'tokens' must contain token ids in [0, " + std::to_string(vocab) + "), got " +
                                   t.dump());
      ids.push_back(t.get<int32_t>());
    }
    return json_reply({{"content", tokenizer.decode(ids)}});
  });
}

HttpReply llama_apply_template(const Service& svc, const std::string& body) {
  if (!svc.ready())
    return error_reply(unavailable("the model is still loading; GET /health says when it is ready"));
  return with_body(body, [&](const json& b) {
    GenerationRequest r;
    parse_messages_field(b, r);
    auto rendered = svc.render_chat(r.messages, r.tools, true);
    if (auto* e = std::get_if<ApiError>(&rendered)) return error_reply(*e);
    return json_reply({{"prompt", std::get<std::string>(rendered)}});
  });
}

HttpReply llama_props(const Service& svc) {
  auto m = ready_model(svc);
  if (auto* e = std::get_if<ApiError>(&m)) return error_reply(*e);
  const ServedModel& model = *std::get<const ServedModel*>(m);
  const SlotBoard& slots = *svc.slots();
  json settings = slots.idle_slot_json(0, svc.defaults().sampling, svc.defaults().seed);
  // The server's grammar (--grammar, -j, ...) where llama-server reports it; "" when none.
  settings["params"]["grammar"] = svc.defaults().grammar_gbnf;
  const auto& tmpl = model.chat_template;
  return json_reply({{"default_generation_settings", settings},
                     {"total_slots", slots.size()},
                     {"model_path", svc.model_path()},
                     {"model_alias", svc.model_id()},
                     {"chat_template", tmpl ? tmpl->source() : ""},
                     {"bos_token", tmpl ? tmpl->bos_token() : ""},
                     {"eos_token", tmpl ? tmpl->eos_token() : ""},
                     {"n_ctx", model.engine->context()},
                     {"modalities", {{"vision", false}, {"audio", false}}},
                     {"endpoint_slots", true},
                     {"endpoint_props", true},
                     {"endpoint_metrics", true},
                     {"embeddings", svc.embedder() != nullptr},
                     {"speculative", model.engine->has_drafter()},
                     {"build_info", std::string("tandem ") + TANDEM_VERSION}});
}

HttpReply llama_slots(const Service& svc, bool fail_on_no_slot) {
  if (!svc.ready())
    return error_reply(unavailable("the model is still loading; GET /health says when it is ready"));
  json slots = svc.slots()->snapshot();
  if (fail_on_no_slot) {
    bool any_idle = false;
    for (const auto& s : slots) any_idle = any_idle || !s["is_processing"].get<bool>();
    if (!any_idle) return error_reply(unavailable("no slot available"));
  }
  return json_reply(slots);
}

namespace {

const char* stop_type(const GenerationRun::Choice& c) {
  if (c.stop.stopped()) return "word";
  if (c.finish == scheduler::FinishReason::length) return "limit";
  if (c.finish == scheduler::FinishReason::stop) return "eos";
  return "none";
}

// llama-server's completion_probabilities entries for tokens [from, to).
json probabilities_json(const GenerationRun::Choice& c, const tok::Tokenizer* tokenizer, size_t from,
                        size_t to) {
  auto entry = [&](int32_t id, float logprob) {
    std::string text;
    if (tokenizer) {
      const int32_t one[1] = {id};
      text = tokenizer->decode_raw(one);
    }
    json bytes = json::array();
    for (unsigned char ch : text) bytes.push_back(static_cast<int>(ch));
    return json{{"id", id}, {"token", text}, {"bytes", bytes}, {"logprob", logprob}};
  };
  json out = json::array();
  for (size_t i = from; i < to && i < c.tokens.size(); ++i) {
    json e = entry(c.tokens[i].token, c.tokens[i].logprob);
    json top = json::array();
    for (const auto& alt : c.tokens[i].top) top.push_back(entry(alt.token, alt.logprob));
    e["top_logprobs"] = top;
    out.push_back(e);
  }
  return out;
}

}  // namespace

json llama_completion_json(const GenerationRun& run, const std::string& model, bool streamed) {
  const GenerationRun::Choice& c = run.choices().front();
  const GenerationRequest& req = run.request();
  const std::string type = stop_type(c);
  const int64_t predicted = static_cast<int64_t>(c.tokens.size());
  const json timings = run.timings();
  json j = {
      {"index", 0},
      {"content", streamed ? std::string() : c.text},
      {"tokens", json::array()},
      {"id_slot", run.slot()},
      {"stop", true},
      {"model", model},
      {"tokens_predicted", predicted},
      {"tokens_evaluated", run.prompt_tokens()},
      {"tokens_cached", timings["cache_n"]},
      {"generation_settings", llama_params_json(c.request->params, req.max_tokens.value_or(-1), req.stop,
                                                req.stream, static_cast<int64_t>(c.request->params.seed))},
      {"prompt", req.prompt_text.value_or("")},
      {"has_new_line", c.text.find('\n') != std::string::npos},
      {"truncated", false},
      {"stop_type", type},
      {"stopped_eos", type == "eos"},
      {"stopped_word", type == "word"},
      {"stopped_limit", type == "limit"},
      {"stopping_word", c.stop.matched()},
      {"timings", timings}};
  if (req.logprobs && !streamed)
    j["completion_probabilities"] = probabilities_json(c, run.tokenizer(), 0, c.tokens.size());
  return j;
}

json llama_chunk_json(const GenerationRun& run, const std::string& content, int64_t tokens_predicted) {
  return {{"index", 0},
          {"content", content},
          {"tokens", json::array()},
          {"stop", false},
          {"id_slot", run.slot()},
          {"tokens_predicted", tokens_predicted},
          {"tokens_evaluated", run.prompt_tokens()}};
}

}  // namespace tandem::server
