#include "serve_options.h"

#include "common_options.h"
#include "core/env.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "scheduler/metrics.h"
#include "serve_device.h"

namespace tandem::app {
namespace {

bool given(const CLI::Option* o) { return o && o->count() > 0; }

// -v, -lv N, --log-disable (the flags win over TANDEM_LOG_LEVEL); else
// LLAMA_ARG_LOG_VERBOSITY when TANDEM_LOG_LEVEL is unset.
Status apply_verbosity(const ServeOptions& o) {
  auto level_of = [](int v) {
    if (v <= 0) return spdlog::level::critical;
    if (v == 1) return spdlog::level::err;
    if (v == 2) return spdlog::level::warn;
    if (v == 3) return spdlog::level::info;
    if (v == 4) return spdlog::level::debug;
    return spdlog::level::trace;
  };
  if (given(o.log_disable_option)) {
    spdlog::set_level(spdlog::level::off);
  } else if (given(o.verbose_option)) {
    spdlog::set_level(spdlog::level::trace);
  } else if (given(o.verbosity_option)) {
    spdlog::set_level(level_of(o.given.verbosity));
  } else if (auto v = env_string("LLAMA_ARG_LOG_VERBOSITY"); v && !is_blank(*v)) {
    TANDEM_RETURN_IF_ERROR(check_int_value("LLAMA_ARG_LOG_VERBOSITY", *v, 0, 1000));
    if (auto t = env_string("TANDEM_LOG_LEVEL"); !t || is_blank(*t))
      spdlog::set_level(level_of(static_cast<int>(*parse_int(*v))));
  }
  return Status::Ok();
}

Status resolve_chat_template(ServeOptions& o) {
  const bool inline_given = given(o.chat_template_option), file_given = given(o.chat_template_file_option);
  if (inline_given && file_given)
    return invalid_argument("--chat-template and --chat-template-file: give one of them");
  if (file_given) {
    auto text = read_text_file(o.given.chat_template_file);
    if (!text.ok())
      return invalid_argument("--chat-template-file " + o.given.chat_template_file + ": " +
                              text.status().message());
    o.chat_template = {*text, "", "--chat-template-file " + o.given.chat_template_file};
  } else if (inline_given) {
    const std::string& v = o.given.chat_template;
    // A template's text has Jinja delimiters; anything else is a name (llama-server's two uses).
    if (v.find("{%") != std::string::npos || v.find("{{") != std::string::npos)
      o.chat_template = {v, "", "--chat-template (an inline template)"};
    else
      o.chat_template = {"", trim(v), "--chat-template " + trim(v)};
  }
  if (given(o.chat_template_kwargs_option)) {
    try {
      o.chat_template_kwargs = nlohmann::ordered_json::parse(o.given.chat_template_kwargs);
    } catch (const nlohmann::json::exception& e) {
      return invalid_argument("--chat-template-kwargs: not valid JSON: " + std::string(e.what()));
    }
    if (!o.chat_template_kwargs.is_object())
      return invalid_argument(
          "--chat-template-kwargs: must be a JSON object, e.g. '{\"enable_thinking\": false}'");
  }
  return Status::Ok();
}

// --draft-max N (K = N + 1), --draft-min, --spec-type, then the drafter's
// own resolution (TANDEM_DRAFT_*), then llama-server's draft-count variables.
Status resolve_speculation_flags(ServeOptions& o) {
  const int k_max_drafts = scheduler::kMaxDraftBlockSize - 1;
  if (given(o.draft_max_option)) {
    const int n = o.given.draft_max;
    if (o.drafter.dir.empty() && env_string("LLAMA_ARG_MODEL_DRAFT").value_or("").empty() &&
        env_string("LLAMA_ARG_SPEC_DRAFT_MODEL").value_or("").empty())
      return invalid_argument("--draft-max " + std::to_string(n) + " needs a drafter (-md DIR)");
    if (n < 1 || n > k_max_drafts)
      return invalid_argument("--draft-max " + std::to_string(n) + ": out of range; accepted: 1.." +
                              std::to_string(k_max_drafts) + " (tandem's block size K = drafts + 1)");
    if (o.drafter.block_size != 0 && o.drafter.block_size != n + 1)
      return invalid_argument("--draft-max " + std::to_string(n) + " and --draft-block-size " +
                              std::to_string(o.drafter.block_size) + " disagree (K = --draft-max + 1)");
    o.drafter.block_size = n + 1;
    o.drafter.block_size_rule = "--draft-max";
  }
  if (given(o.draft_min_option)) {
    const int m = o.given.draft_min;
    const int drafts = o.drafter.block_size ? o.drafter.block_size - 1 : 0;
    if (m < 0 || (drafts && m > drafts))
      return invalid_argument("--draft-min " + std::to_string(m) + ": must be 0.." +
                              (drafts ? std::to_string(drafts) + " (the drafts per round)" : "--draft-max"));
    spdlog::info("--draft-min {}: accepted, no effect: every speculative round drafts K-1 tokens", m);
  }
  if (given(o.spec_type_option)) {
    const std::string t = to_lower(trim(o.given.spec_type));
    if (t == "draft-simple" || t == "draft-mtp") {
      const std::string kind = t == "draft-mtp" ? "mtp" : "draft";
      if (!o.drafter.kind.empty() && o.drafter.kind != kind)
        return invalid_argument("--spec-type " + t + " and --draft-kind " + o.drafter.kind + " disagree");
      o.drafter.kind = kind;
      o.drafter.kind_rule = "--spec-type";
    } else if (t == "none") {
      if (!o.drafter.dir.empty())
        return invalid_argument("--spec-type none with a drafter (-md): leave out one of them");
    } else {
      return invalid_argument(
          "--spec-type " + o.given.spec_type +
          ": not supported; accepted: draft-simple (a draft model), draft-mtp (an MTP head), "
          "none; n-gram and EAGLE-style speculation are not implemented");
    }
  }
  TANDEM_RETURN_IF_ERROR(resolve_drafter_options(o.drafter));
  // llama-server's variables for the draft count, when nothing else set K.
  if (o.drafter.block_size == 0 && !o.drafter.dir.empty()) {
    for (const char* name : {"LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_DRAFT_MAX"}) {
      auto v = env_string(name);
      if (!v || is_blank(*v)) continue;
      TANDEM_RETURN_IF_ERROR(check_int_value(name, *v, 1, k_max_drafts));
      o.drafter.block_size = static_cast<int>(*parse_int(*v)) + 1;
      o.drafter.block_size_rule = name;
      break;
    }
  }
  return Status::Ok();
}

}  // namespace

void add_serve_options(CLI::App* sub, ServeOptions& o) {
  ServeOptions* p = &o;
  // A flag given twice: the last one wins, as in llama-server (scripts append overrides).
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_model_option(sub, o.model, /*from_env=*/true);
  add_drafter_options(sub, o.drafter, true);
  // Every mirrored flag also reads TANDEM_<NAME>, then llama-server's LLAMA_ARG_<NAME>
  // (apply_env_mirrors, at start-up: an invalid value exits 2 naming the variable); the flag wins.
  auto mirror = [p](CLI::Option* option, std::vector<const char*> names, bool boolean = false) {
    p->mirrors.push_back({option, std::move(names), boolean});
    return option;
  };
  mirror(sub->add_option("-a,--alias", o.alias,
                         "Model id to serve under (default: org/name for a Hub cache snapshot, else the "
                         "directory's name; env LLAMA_ARG_ALIAS)"),
         {"LLAMA_ARG_ALIAS"});
  mirror(sub->add_option("--host", o.host, "Address to listen on (env TANDEM_HOST, LLAMA_ARG_HOST)")
             ->capture_default_str(),
         {"TANDEM_HOST", "LLAMA_ARG_HOST"});
  mirror(sub->add_option("--port", o.port, "Port (0: any free port; env TANDEM_PORT, LLAMA_ARG_PORT)")
             ->check(CLI::Range(0, 65535))
             ->capture_default_str(),
         {"TANDEM_PORT", "LLAMA_ARG_PORT"});
  mirror(
      sub->add_option("-c,--ctx-size", o.context,
                      "Context per sequence in tokens (default: model's, at most 4096; env TANDEM_CTX_SIZE, "
                      "LLAMA_ARG_CTX_SIZE)")
          ->check(CLI::Range(int64_t{0}, int64_t{1} << 24)),
      {"TANDEM_CTX_SIZE", "LLAMA_ARG_CTX_SIZE"});
  mirror(sub->add_option("--parallel", o.parallel,
                         "Sequences decoded concurrently (-np; env TANDEM_PARALLEL, LLAMA_ARG_N_PARALLEL)")
             ->check(CLI::Range(1, 1024))
             ->capture_default_str(),
         {"TANDEM_PARALLEL", "LLAMA_ARG_N_PARALLEL"});
  mirror(sub->add_option(
                "-b,--batch-size", o.batch,
                "Prompt tokens prefilled per engine step, shared by the requests being prefilled; smaller "
                "keeps decoding streams smoother while prompts arrive, larger gives faster first tokens "
                "(env TANDEM_BATCH_SIZE, LLAMA_ARG_BATCH)")
             ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
             ->capture_default_str(),
         {"TANDEM_BATCH_SIZE", "LLAMA_ARG_BATCH"});
  mirror(sub->add_flag(
             "--no-prefix-cache", o.no_prefix_cache,
             "Prefill every prompt in full instead of reusing cached prompt prefixes (reuse is exact: the "
             "output is the same either way; env TANDEM_NO_PREFIX_CACHE)"),
         {"TANDEM_NO_PREFIX_CACHE"}, true);
  o.cache_prompt_option =
      mirror(sub->add_flag("--cache-prompt,!--no-cache-prompt", o.given.cache_prompt,
                           "llama-server's spelling of the prefix cache switch "
                           "(--no-cache-prompt = --no-prefix-cache; env LLAMA_ARG_CACHE_PROMPT)"),
             {"LLAMA_ARG_CACHE_PROMPT"}, true);
  o.cache_ram_option = mirror(sub->add_option("--cache-ram", o.given.cache_ram,
                                              "-cram: 0 turns the prefix cache off; any other value changes "
                                              "nothing (it lives in the KV pool's free blocks; env "
                                              "LLAMA_ARG_CACHE_RAM)"),
                              {"LLAMA_ARG_CACHE_RAM"});
  sub->add_option("--api-key", o.api_key, "API key(s), comma-separated (env TANDEM_API_KEY / LLAMA_API_KEY)");
  sub->add_option("--api-key-file", o.api_key_file,
                  "File with one API key per line (env TANDEM_API_KEY_FILE, LLAMA_ARG_API_KEY_FILE)");
  mirror(add_threads_option(sub, o.threads, 0, /*from_env=*/true), kThreadsVariables);
  add_gemm_option(sub, o.gemm);
  // Where the model runs (serve_device.h, ADR 0030): tandem's spellings and llama-server's.
  o.device_option =
      mirror(sub->add_option(
                 "--device", o.device,
                 "-dev: where the model runs: auto|cpu|cuda|cuda:N, or llama-server's none|CUDA0 (default "
                 "auto: cuda when a device is present and the weights are bf16 or GPU-quantized (q8_0, q4_0, "
                 "q5_0, q4_k, q5_k, q6_k); env TANDEM_DEVICE, "
                 "LLAMA_ARG_DEVICE)"),
             {"TANDEM_DEVICE", "LLAMA_ARG_DEVICE"});
  o.gpu_layers_option =
      mirror(sub->add_option("--n-gpu-layers,--gpu-layers", o.gpu_layers,
                             "-ngl: llama-server's layer count on the GPU: 0 = cpu, all / -1 / at least the "
                             "model's layers = every layer on the GPU, auto = as --device says; partial "
                             "offload is refused (env LLAMA_ARG_N_GPU_LAYERS)"),
             {"LLAMA_ARG_N_GPU_LAYERS"});
  sub->add_option("--max-body-bytes", o.max_body, "Largest request body accepted")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 32))
      ->capture_default_str();

  // Server-wide request defaults (server/request_defaults.h: the request, then these, then
  // generation_config.json, then the built-in).
  auto sampling = [&](const char* names, auto& field, const char* help, const char* env) {
    CLI::Option* opt =
        sub->add_option(names, field, std::string(help) + " (default for requests; env " + env + ")");
    o.sampling_options.push_back(mirror(opt, {env}));
    return opt;
  };
  // CLI11 checks the ranges too (so a variable's bad value is reported naming the variable);
  // check_server_sampling_flags has the API's exact ones (top-p > 0, repetition penalty > 0).
  sampling("--temp,--temperature", o.given.temp, "Temperature", "LLAMA_ARG_TEMPERATURE")
      ->check(CLI::Range(0.0, 2.0));
  sampling("--top-p", o.given.top_p, "Top-p", "LLAMA_ARG_TOP_P")->check(CLI::Range(0.0, 1.0));
  sampling("--min-p", o.given.min_p, "Min-p", "LLAMA_ARG_MIN_P")->check(CLI::Range(0.0, 1.0));
  sampling("--repeat-penalty", o.given.repeat_penalty, "Repetition penalty (HF style)",
           "LLAMA_ARG_REPEAT_PENALTY")
      ->check(CLI::PositiveNumber);
  sampling("--presence-penalty", o.given.presence_penalty, "Presence penalty", "LLAMA_ARG_PRESENCE_PENALTY")
      ->check(CLI::Range(-2.0, 2.0));
  sampling("--frequency-penalty", o.given.frequency_penalty, "Frequency penalty",
           "LLAMA_ARG_FREQUENCY_PENALTY")
      ->check(CLI::Range(-2.0, 2.0));
  sampling("--top-k", o.given.top_k, "Top-k (0: off)", "LLAMA_ARG_TOP_K")->check(CLI::NonNegativeNumber);
  o.n_predict_option =
      mirror(sub->add_option("-n,--predict,--n-predict", o.given.n_predict,
                             "max_tokens of a request that gives none (-1: up to the context, "
                             "even when generation_config.json caps it; env LLAMA_ARG_N_PREDICT)"),
             {"LLAMA_ARG_N_PREDICT"});
  o.sampling_options.push_back(sub->add_option("-s,--seed", o.given.seed,
                                               "Seed of a request that gives none (-1: random per request)"));

  o.chat_template_option =
      mirror(sub->add_option(
                 "--chat-template", o.given.chat_template,
                 "A Jinja chat template's text, or a name: one of tokenizer_config.json's named templates, "
                 "or a built-in (chatml, llama3) (env LLAMA_ARG_CHAT_TEMPLATE)"),
             {"LLAMA_ARG_CHAT_TEMPLATE"});
  o.chat_template_file_option =
      mirror(sub->add_option("--chat-template-file", o.given.chat_template_file,
                             "A file with a Jinja chat template (env LLAMA_ARG_CHAT_TEMPLATE_FILE)"),
             {"LLAMA_ARG_CHAT_TEMPLATE_FILE"});
  o.chat_template_kwargs_option = mirror(
      sub->add_option("--chat-template-kwargs", o.given.chat_template_kwargs,
                      "A JSON object of extra chat-template variables, e.g. '{\"enable_thinking\":false}' "
                      "(env LLAMA_ARG_CHAT_TEMPLATE_KWARGS)"),
      {"LLAMA_ARG_CHAT_TEMPLATE_KWARGS"});

  o.verbose_option = sub->add_flag("-v,--verbose,--log-verbose", o.given.verbose, "Log everything (trace)");
  o.verbosity_option =
      sub->add_option("--verbosity,--log-verbosity", o.given.verbosity,
                      "-lv: 0 critical only, 1 errors, 2 warnings, 3 info, 4 debug, 5 trace (env "
                      "LLAMA_ARG_LOG_VERBOSITY, which TANDEM_LOG_LEVEL beats)")
          ->check(CLI::Range(0, 1000));
  o.log_disable_option = sub->add_flag("--log-disable", o.given.log_disable, "No log output");

  mirror(sub->add_option(
                "--timeout", o.http.timeout_s,
                "-to: socket read/write timeout in seconds (default: cpp-httplib's; env LLAMA_ARG_TIMEOUT)")
             ->check(CLI::Range(1, 86400)),
         {"LLAMA_ARG_TIMEOUT"});
  mirror(sub->add_option("--threads-http", o.given.threads_http,
                         "HTTP worker threads, one per connection (-1: max(128, 2 * -np + 4); env "
                         "LLAMA_ARG_THREADS_HTTP)")
             ->check(CLI::Range(-1, 65536)),
         {"LLAMA_ARG_THREADS_HTTP"});
  CLI::Option* webui = sub->add_flag("--webui,--ui,!--no-webui,!--no-ui", o.http.webui,
                                     "Serve the web page at GET / (default: on; docs/webui.md; env "
                                     "TANDEM_NO_WEBUI, LLAMA_ARG_NO_WEBUI, LLAMA_ARG_UI)");
  o.mirrors.push_back({webui, {"TANDEM_NO_WEBUI", "LLAMA_ARG_NO_WEBUI"}, true, /*inverted=*/true});
  mirror(webui, {"LLAMA_ARG_UI"}, true);
  // Compatibility routes (docs/api.md, docs/adr/0017-compat-endpoints.md, 0018-embeddings.md).
  mirror(sub->add_option("--cors-origin,--cors-origins", o.http.cors_origins,
                         "Allow browsers on ORIGIN (repeatable or a comma list; '*': any) to call the API; "
                         "default: CORS off (env TANDEM_CORS_ORIGIN, LLAMA_ARG_CORS_ORIGINS)"),
         {"TANDEM_CORS_ORIGIN", "LLAMA_ARG_CORS_ORIGINS"});
  mirror(sub->add_flag("--embeddings,--embedding", o.http.embeddings,
                       "Serve POST /v1/embeddings (a second forward with its own KV cache; env "
                       "TANDEM_EMBEDDINGS, LLAMA_ARG_EMBEDDINGS)"),
         {"TANDEM_EMBEDDINGS", "LLAMA_ARG_EMBEDDINGS"}, true);
  mirror(sub->add_option("--pooling", o.http.pooling,
                         "Embedding pooling: mean or last (default: the model's 1_Pooling/config.json, else "
                         "mean; env TANDEM_POOLING, LLAMA_ARG_POOLING)")
             ->transform(CLI::IsMember({"mean", "last"}, CLI::ignore_case)),
         {"TANDEM_POOLING", "LLAMA_ARG_POOLING"});
  sub->add_option("--embd-normalize", o.given.embd_normalize,
                  "Embedding normalisation: only 2 (euclidean, the default) is supported")
      ->check(CLI::Range(-1, 1000));
  mirror(sub->add_option("--model-match", o.model_match,
                         "A request's unknown 'model': strict = 404 model_not_found (vLLM), any = served "
                         "anyway (llama-server) (env TANDEM_MODEL_MATCH)")
             ->transform(CLI::IsMember({"strict", "any"}, CLI::ignore_case))
             ->capture_default_str(),
         {"TANDEM_MODEL_MATCH"});

  o.draft_max_option =
      sub->add_option("--spec-draft-n-max,--draft-max,--draft,--draft-n", o.given.draft_max,
                      "Drafts per speculative round (tandem's K = N + 1, like --draft-block-size; "
                      "env LLAMA_ARG_SPEC_DRAFT_N_MAX, LLAMA_ARG_DRAFT_MAX)");
  o.draft_min_option = sub->add_option("--spec-draft-n-min,--draft-min,--draft-n-min", o.given.draft_min,
                                       "Accepted up to the drafts per round; every round drafts K-1 tokens");
  o.spec_type_option =
      sub->add_option("--spec-type", o.given.spec_type,
                      "draft-simple (a draft model) or draft-mtp (an MTP head): --draft-kind");
  add_weights_option(sub, o.weights);
  add_serve_grammar_options(sub, o.grammar);
  add_llama_flags(sub, o.llama);
}

Status resolve_serve_options(ServeOptions& o) {
  TANDEM_RETURN_IF_ERROR(apply_verbosity(o));  // first: the no-ops below are logged at its level
  TANDEM_RETURN_IF_ERROR(check_llama_flags(o.llama));
  // Sampling defaults, in ServerSamplingFlags' order (see add_serve_options).
  auto& s = o.sampling;
  const auto& g = o.given;
  const auto& opts = o.sampling_options;
  if (given(opts[0])) s.temperature = g.temp;
  if (given(opts[1])) s.top_p = g.top_p;
  if (given(opts[2])) s.min_p = g.min_p;
  if (given(opts[3])) s.repetition_penalty = g.repeat_penalty;
  if (given(opts[4])) s.presence_penalty = g.presence_penalty;
  if (given(opts[5])) s.frequency_penalty = g.frequency_penalty;
  if (given(opts[6])) s.top_k = g.top_k;
  if (given(opts[7])) s.seed = g.seed;
  if (given(o.n_predict_option)) s.max_tokens = g.n_predict;
  if (auto e = server::check_server_sampling_flags(s)) return invalid_argument(*e);
  TANDEM_RETURN_IF_ERROR(resolve_chat_template(o));
  TANDEM_RETURN_IF_ERROR(resolve_serve_grammar(o.grammar));
  TANDEM_RETURN_IF_ERROR(resolve_speculation_flags(o));
  if (given(o.cache_prompt_option) && !g.cache_prompt) o.no_prefix_cache = true;
  if (given(o.cache_ram_option)) {
    if (g.cache_ram == 0)
      o.no_prefix_cache = true;
    else
      spdlog::info("--cache-ram {}: accepted, no effect: the prefix cache lives in the KV pool's free blocks",
                   g.cache_ram);
  }
  if (!o.device.empty()) {
    TANDEM_ASSIGN_OR_RETURN(o.device, normalize_serve_device(o.device, o.device_from));
  }
  if (o.alias.find(',') != std::string::npos)
    return invalid_argument("-a/--alias " + o.alias +
                            ": several aliases are not supported; give one model id");
  o.http.host = o.host;
  o.http.port = o.port;
  // One HTTP worker per connection, a stream holding its worker to the end (and an idle
  // keep-alive connection for up to 5 s): far more workers than -np, so that requests
  // beyond -np queue in the engine (num_requests_waiting) instead of unread in the
  // accept queue, and /health and /metrics still answer under load.
  o.http.worker_threads = g.threads_http > 0 ? g.threads_http : std::max(128, o.parallel * 2 + 4);
  o.http.pooling = to_lower(o.http.pooling);
  if (o.given.embd_normalize != 2)
    return invalid_argument("--embd-normalize " + std::to_string(o.given.embd_normalize) +
                            ": only 2 (euclidean, L2) is supported");
  return Status::Ok();
}

}  // namespace tandem::app
