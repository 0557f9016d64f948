#include "server/service.h"

#include <algorithm>
#include <ctime>

#include "core/log.h"
#include "grammar/token_constraint.h"
#include "server/generation.h"
#include "server/metrics_text.h"
#include "server/slot_board.h"

namespace tandem::server {

using nlohmann::json;

namespace {

// /health's "device": {"name": "cuda:0", "description": "cuda:0 (NVIDIA H200, ...)", "model", "sm",
// "driver", "numerics"} — absent fields are null (on the CPU all but name and numerics,
// the bf16 weights' activations: ADR 0082).
json device_json(const model::DeviceInfo& d) {
  auto opt = [](const std::string& v) { return v.empty() ? json(nullptr) : json(v); };
  return {{"name", d.device}, {"description", d.description()}, {"model", opt(d.model)},
          {"sm", opt(d.sm)},  {"driver", opt(d.driver)},        {"numerics", opt(d.numerics)}};
}

}  // namespace

HttpReply error_reply(const ApiError& error) {
  return {error.http_status, "application/json", error_body(error)};
}

Service::Service(std::string model_id, ApiKeys keys, size_t max_body_bytes)
    : model_id_(std::move(model_id)),
      keys_(std::move(keys)),
      max_body_bytes_(max_body_bytes),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

Service::~Service() = default;

void Service::attach(ServedModel served, RequestDefaults defaults) {
  served_ = std::move(served);
  defaults_ = std::move(defaults);
  slots_ = std::make_unique<SlotBoard>(served_.engine->config().max_running, served_.engine->context(),
                                       served_.engine->has_drafter());
  if (embeddings_enabled_) {
    auto embedder = Embedder::create(served_.engine->target(), served_.engine->context(), pooling_);
    if (embedder.ok()) {
      embedder_ = std::move(*embedder);
      spdlog::info("embeddings: /v1/embeddings on, {} pooling, {} dimensions", pooling_name(pooling_),
                   embedder_->dimensions());
    } else {
      spdlog::error("embeddings: {} (/v1/embeddings answers 501)", embedder.status().message());
    }
  }
  ready_.store(true, std::memory_order_release);
}

bool Service::model_matches(const std::string& name) const {
  if (name.empty() || model_match_ == ModelMatch::any || name == model_id_) return true;
  constexpr std::string_view kLatest = ":latest";
  return name.size() == model_id_.size() + kLatest.size() &&
         name.compare(0, model_id_.size(), model_id_) == 0 &&
         name.compare(model_id_.size(), std::string::npos, kLatest) == 0;
}

HttpReply Service::health() const {
  // 503 while draining too, so that a load balancer's health check (or a Kubernetes readiness
  // probe) takes the replica out before its listener closes (docs/scaling.md).
  const bool draining = ready() && shutting_down_.load();
  const char* status = !ready() ? "loading" : draining ? "shutting_down" : "ok";
  json body = {{"status", status}};
  // Where the model runs (ADR 0030), once it is loaded.
  if (ready()) body["device"] = device_json(served_.engine->device());
  body["observability"] = {{"mtp_policy", mtp_policy_json()}};
  return {ready() && !draining ? 200 : 503, "application/json", dump_json(body)};
}

json Service::mtp_policy_json() const {
  const scheduler::PolicyReport r =
      ready() ? served_.engine->policy_board().read() : scheduler::PolicyReport{};
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return {{"schema_version", 1},
          {"state", r.state},
          {"reason", opt(r.reason)},
          {"decline_detail", opt(r.decline_detail)},
          {"verdict", opt(r.verdict)},
          {"mtp_enabled", opt(r.mtp_enabled)},
          {"draft_kind", opt(r.draft_kind)},
          {"target", opt(r.target)},
          {"drafter", opt(r.drafter)},
          {"hardware", opt(r.hardware)},
          {"block_size", opt(r.block_size)},
          {"acceptance_rate", opt(r.acceptance_rate)},
          {"samples", r.samples},
          {"samples_required", scheduler::kSamplesRequired},
          {"samples_remaining", opt(r.samples_remaining)},
          // Additive within schema_version 1 (docs/adr/0005-policy-confidence.md).
          {"samples_max", scheduler::kSamplesMax},
          {"speedup", opt(r.speedup)},
          {"speedup_log_stddev", opt(r.speedup_log_stddev)},
          {"speedup_low", opt(r.speedup_low)},
          {"speedup_high", opt(r.speedup_high)},
          {"speedup_threshold", opt(r.speedup_threshold)},
          {"settle_reason", opt(r.settle_reason)},
          {"verdict_source", opt(r.verdict_source)},
          {"reprofile_reason", opt(r.reprofile_reason)},
          {"reprofiles", r.reprofiles},
          {"served_speedup", opt(r.served_speedup)},
          {"contradicting_windows", r.contradicting_windows}};
}

HttpReply Service::mtp_policy() const { return {200, "application/json", dump_json(mtp_policy_json())}; }

namespace {

json model_object(const std::string& id, int64_t created, const ServedModel* served) {
  json model = {{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "tandem"}};
  if (served)
    model["meta"] = {{"context_length", served->engine->context()},
                     {"vocab_size", served->engine->target().config().vocab_size},
                     {"device", served->engine->device().device},
                     {"device_name", served->engine->device().description()}};
  return model;
}

// llama-server's [["text", bias]] logit_bias entries: the bias goes to every token of the text as
// llama-server tokenizes it (add_special and parse_special false): no BOS, and a special token's
// own text in it is ordinary text, so it never reaches that token's id.
std::optional<ApiError> resolve_text_logit_bias(const tok::Tokenizer* tokenizer, GenerationRequest& req) {
  for (const GenerationRequest::TextBias& t : req.text_logit_bias) {
    if (!tokenizer)
      return bad_request("logit_bias",
                         t.entry +
                             " is a text: this model directory has no tokenizer.json to "
                             "find its tokens; give token ids",
                         "no_tokenizer");
    const std::vector<int32_t> ids = tokenizer->encode_special_as_text(t.text);
    if (ids.empty()) return bad_request("logit_bias", t.entry + " text tokenizes to no token");
    for (int32_t id : ids) req.sampling.logit_bias.emplace_back(id, t.bias);
  }
  req.text_logit_bias.clear();
  return std::nullopt;
}

}  // namespace

HttpReply Service::models() const {
  json model = model_object(model_id_, created_, ready() ? &served_ : nullptr);
  return {200, "application/json", dump_json({{"object", "list"}, {"data", json::array({model})}})};
}

HttpReply Service::model(const std::string& id) const {
  // Listing is exact even under --model-match any: the list has one id.
  if (id != model_id_) return error_reply(model_not_found(id));
  return {200, "application/json",
          dump_json(model_object(model_id_, created_, ready() ? &served_ : nullptr))};
}

HttpReply Service::metrics() const {
  const char* state = !ready() ? "loading" : shutting_down_.load() ? "shutting_down" : "ready";
  std::string body = server_metrics_text(metrics_, state, model_id_);
  // The engine's series exist once it is attached.
  if (ready()) {
    body += engine_metrics_text(served_.engine->metrics(), served_.engine->policy_board().read(), model_id_);
    body += device_metrics_text(served_.engine->device(), model_id_);
  }
  return {200, "text/plain; version=0.0.4", std::move(body)};
}

std::variant<std::unique_ptr<GenerationRun>, ApiError> Service::start_generation(Endpoint endpoint,
                                                                                 const std::string& body) {
  if (!ready()) return unavailable("the model is still loading; GET /health says when it is ready");
  if (shutting_down_.load()) return unavailable("the server is shutting down");
  ParseResult parsed = parse_generation_request(endpoint, body, defaults_.sampling);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  return start_request(std::move(std::get<GenerationRequest>(parsed)));
}

std::variant<std::string, ApiError> Service::render_chat(const json& messages, const json& tools,
                                                         bool add_generation_prompt) const {
  return render_chat_ordered(
      nlohmann::ordered_json::parse(messages.dump()),
      tools.is_null() ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(tools.dump()),
      add_generation_prompt);
}

std::variant<std::string, ApiError> Service::render_chat_ordered(nlohmann::ordered_json messages,
                                                                 nlohmann::ordered_json tools,
                                                                 bool add_generation_prompt) const {
  if (!served_.chat_template)
    return bad_request("messages",
                       "this model has no chat template (tokenizer_config.json); use /v1/completions",
                       "no_chat_template");
  tok::ChatRenderInput input;
  input.messages = std::move(messages);
  prepare_messages_for_template(input.messages);
  // Content given as text parts renders as the joined string (templates expect strings).
  for (auto& m : input.messages) {
    if (!m.contains("content") || !m["content"].is_array()) continue;
    std::string joined;
    for (const auto& part : m["content"]) joined += part.value("text", std::string());
    m["content"] = joined;
  }
  if (!tools.is_null()) input.tools = std::move(tools);
  input.add_generation_prompt = add_generation_prompt;
  input.extra = defaults_.chat_template_kwargs;
  auto rendered = served_.chat_template->render(input);
  if (!rendered.ok())
    return bad_request("messages", "the chat template failed: " + rendered.status().message());
  return std::move(*rendered);
}

std::variant<std::unique_ptr<GenerationRun>, ApiError> Service::start_request(GenerationRequest req,
                                                                              bool add_special) {
  if (!ready()) return unavailable("the model is still loading; GET /health says when it is ready");
  if (shutting_down_.load()) return unavailable("the server is shutting down");
  const Endpoint endpoint = req.endpoint;
  if (!model_matches(req.model)) return model_not_found(req.model);
  // Without tokenizer.json only token-id prompts work; choices then carry
  // "token_ids" and an empty text.
  const tok::Tokenizer* tokenizer = served_.tokenizer ? &*served_.tokenizer : nullptr;
  if (!tokenizer && (endpoint == Endpoint::chat_completions || req.prompt_text))
    return bad_request(
        endpoint == Endpoint::chat_completions ? "messages" : "prompt",
        "this model directory has no tokenizer.json: send the prompt as an array of token ids to "
        "/v1/completions",
        "no_tokenizer");
  if (auto e = resolve_text_logit_bias(tokenizer, req)) return *e;
  scheduler::Engine& engine = *served_.engine;

  std::vector<int32_t> prompt;
  std::vector<int32_t> kept_markers;  // special tokens whose text the tool-call parser reads
  if (endpoint == Endpoint::chat_completions) {
    // Moved, not copied: the request's trees are not used again, and a large body's are large.
    nlohmann::ordered_json messages = !req.structured.messages.is_null()
                                          ? std::move(req.structured.messages)
                                          : nlohmann::ordered_json::parse(req.messages.dump());
    nlohmann::ordered_json tools;
    if (!req.structured.tools.is_null()) {
      tools = std::move(req.structured.tools);
    } else if (!req.tools.is_null()) {
      tools = nlohmann::ordered_json::parse(req.tools.dump());
    }
    auto rendered = render_chat_ordered(std::move(messages), std::move(tools), true);
    if (auto* e = std::get_if<ApiError>(&rendered)) return *e;
    prompt = tokenizer->encode(std::get<std::string>(rendered), false);
    const auto format = grammar::detect_tool_call_format(served_.chat_template->source());
    if (req.structured.parses_tool_calls()) {
      // Markers that are special tokens (Mistral's [TOOL_CALLS]): the parser must see them.
      for (const std::string& m : grammar::tool_call_markers(format))
        if (auto id = tokenizer->token_to_id(m); id && tokenizer->is_special(*id))
          kept_markers.push_back(*id);
    }
    if (auto e = finish_tool_grammar(format, req.structured)) return *e;
  } else if (req.prompt_text) {
    prompt = tokenizer->encode(*req.prompt_text, add_special);
  } else {
    prompt = req.prompt_tokens;
  }
  apply_server_grammar(defaults_.grammar, req.structured);
  const int64_t vocab = engine.target().config().vocab_size;
  for (int32_t t : prompt)
    if (t < 0 || t >= vocab)
      return bad_request("prompt", "token id " + std::to_string(t) + " is outside the vocabulary");
  if (prompt.empty()) return bad_request("prompt", "the prompt is empty");
  if (auto e = sampling::check(req.sampling, static_cast<int32_t>(vocab)))
    return bad_request(e->field, e->message);
  const int64_t context = engine.context();
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= context || (req.max_tokens && n_prompt + *req.max_tokens > context)) {
    return ApiError{400, "invalid_request_error",
                    "This model's maximum context length is " + std::to_string(context) +
                        " tokens. However, you requested " +
                        std::to_string(n_prompt + req.max_tokens.value_or(1)) + " tokens (" +
                        std::to_string(n_prompt) + " in the prompt, " +
                        std::to_string(req.max_tokens.value_or(1)) +
                        " for the completion). Please reduce the prompt or max_tokens.",
                    std::string(endpoint == Endpoint::chat_completions ? "messages" : "prompt"),
                    "context_length_exceeded"};
  }
  // A default max_tokens (-n, generation_config.json) is capped by the room the prompt leaves.
  const int64_t room = context - n_prompt;
  const int32_t max_tokens = req.max_tokens
                                 ? *req.max_tokens
                                 : static_cast<int32_t>(std::min(room, defaults_.max_tokens.value_or(room)));
  const uint64_t seed = req.seed ? *req.seed : defaults_.seed ? *defaults_.seed : sampling::random_seed();

  std::shared_ptr<const grammar::TokenTrie> trie;
  if (req.structured.grammar) {
    if (!tokenizer)
      return bad_request(req.structured.grammar_source, "structured outputs need the model's tokenizer.json");
    const bool tool_grammar =
        req.structured.grammar_source == "tools" || req.structured.grammar_source == "tool_choice";
    trie = token_trie_.get(*tokenizer, tool_grammar ? kept_markers : std::vector<int32_t>{});
  }

  std::vector<GenerationRun::Choice> choices;
  for (int32_t i = 0; i < req.n; ++i) {
    auto r = std::make_shared<scheduler::EngineRequest>();
    r->id = next_id_.fetch_add(1);
    r->prompt = prompt;
    r->params = req.sampling;
    r->params.seed = seed + static_cast<uint64_t>(i);  // choice i: seed + i (documented)
    if (trie)  // one per choice: a constraint caches along its own sequence
      r->params.constraint =
          std::make_shared<grammar::GrammarConstraint>(req.structured.grammar, trie, served_.stop_tokens);
    r->max_tokens = max_tokens;
    if (req.ignore_eos != GenerationRequest::IgnoreEos::keep_going) r->stop_tokens = served_.stop_tokens;
    if (req.ignore_eos == GenerationRequest::IgnoreEos::ban)
      for (int32_t id : served_.stop_tokens) r->params.logit_bias.push_back({id, sampling::kNeverProduced});
    r->want_logprobs = req.logprobs;
    GenerationRun::Choice c{r, std::nullopt, StopMatcher(req.stop), {}, {}, {}, {}, {}, false};
    if (tokenizer) c.detok.emplace(*tokenizer, true);
    choices.push_back(std::move(c));
  }
  for (auto& c : choices) {
    if (Status s = engine.submit(c.request); !s.ok()) {
      for (auto& other : choices) other.request->channel->cancel();
      return from_status(s, "max_tokens");
    }
  }
  const std::string prefix = endpoint == Endpoint::chat_completions ? "chatcmpl-" : "cmpl-";
  const uint64_t task = choices.front().request->id;
  SlotTask slot_task{task, n_prompt, max_tokens, choices.front().request->params, req.stop, req.stream};
  auto lease = std::make_unique<SlotBoard::Lease>(slots_->acquire(slot_task));
  auto run = std::make_unique<GenerationRun>(std::move(req), prefix + std::to_string(task), model_id_,
                                             n_prompt, tokenizer, std::move(choices), &metrics_);
  run->set_lease(std::move(lease));
  run->keep_special_tokens(std::move(kept_markers));
  return run;
}

}  // namespace tandem::server
