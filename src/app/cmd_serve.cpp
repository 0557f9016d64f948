// `tandem serve`: the OpenAI-compatible server (llama-server-style flags).
//
// Start-up order: bind the port first (so /health answers 503 while the
// model loads), load the target and drafter, warm the exactness gate, start
// the engine, attach it to the service. SIGINT/SIGTERM: stop accepting,
// give in-flight requests TANDEM_SHUTDOWN_DRAIN_MS (default 5000) to finish,
// cancel the rest, exit 0. A signal while the model loads stops at the next
// load stage (the TANDEM_LOAD_DELAY_MS wait included) and exits 0.
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "commands.h"
#include "common_options.h"
#include "core/env.h"
#include "core/log.h"
#include "drafter_setup.h"
#include "environment.h"
#include "kernels/ops.h"
#include "model/device.h"
#include "runtime/model_name.h"
#include "runtime/opened_model.h"
#include "scheduler/engine.h"
#include "serve_device.h"
#include "serve_options.h"
#include "server/http_server.h"
#include "server/service.h"

namespace tandem::app {
namespace {

// A SIGINT/SIGTERM that arrives within `wait` (0: one already pending). The signals
// are blocked, so one sent while the model loads waits here instead of behind the load.
int pending_signal(const sigset_t& signals, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const auto left = std::max(std::chrono::nanoseconds(0), deadline - std::chrono::steady_clock::now());
    const timespec ts{static_cast<time_t>(left.count() / 1000000000),
                      static_cast<long>(left.count() % 1000000000)};
    const int sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno != EINTR || left.count() == 0) return 0;
  }
}

void apply_env(ServeOptions& o) {
  // Returns the variable that filled the field, if one did.
  auto fill = [](std::string& field, std::initializer_list<const char*> names) -> std::string {
    for (const char* n : names)
      if (field.empty())
        if (auto v = env_string(n); v && !v->empty()) {
          field = *v;
          return n;
        }
    return "";
  };
  for (const char* n : kModelVariables) fill(o.model, {n});
  const std::string key_from = fill(o.api_key, {"TANDEM_API_KEY", "LLAMA_API_KEY"});
  const std::string file_from = fill(o.api_key_file, {"TANDEM_API_KEY_FILE", "LLAMA_ARG_API_KEY_FILE"});
  o.api_key_from = key_from + (!key_from.empty() && !file_from.empty() ? ", " : "") + file_from;
}

int run_serve(ServeOptions& o) {
  apply_env(o);
  // Start-up checks (exit 2): the flags' environment mirrors, then every other variable serve reads.
  auto startup = [&]() -> Status {
    // Before the mirrors fill them: whether --device / -ngl came from the command line.
    auto from = [](const CLI::Option* opt, const char* flag, std::initializer_list<const char*> vars) {
      if (opt->count() > 0) return std::string(flag);
      for (const char* n : vars)
        if (auto v = env_string(n); v && !is_blank(*v)) return std::string(n);
      return std::string();
    };
    o.device_from = from(o.device_option, "--device", {"TANDEM_DEVICE", "LLAMA_ARG_DEVICE"});
    o.gpu_layers_from = from(o.gpu_layers_option, "-ngl/--n-gpu-layers", {"LLAMA_ARG_N_GPU_LAYERS"});
    TANDEM_RETURN_IF_ERROR(apply_env_mirrors(o.mirrors));
    TANDEM_RETURN_IF_ERROR(validate_environment());
    TANDEM_RETURN_IF_ERROR(validate_serve_environment());
    TANDEM_ASSIGN_OR_RETURN(o.weights_quant, resolve_weights_option(o.weights));
    TANDEM_RETURN_IF_ERROR(resolve_serve_options(o));  // the drafter's options too
    // The device last: -ngl N is checked against the model's layer count.
    ServeDeviceRequest where{o.device, o.gpu_layers, o.gpu_layers_from, o.model};
    if (o.gpu_layers_from.rfind("LLAMA_", 0) == 0) where.gpu_layers_from += " (-ngl)";
    TANDEM_ASSIGN_OR_RETURN(o.device, resolve_serve_device(where, model::cuda_available()));
    return check_serve_device(o.device);
  };
  if (Status s = startup(); !s.ok()) return usage_error("serve", s);
  if (o.model.empty()) {
    std::fprintf(stderr, "tandem serve: -m/--model DIR is required (or TANDEM_MODEL)\n");
    return 2;
  }
  // Signals are handled by one thread with sigwait; block them everywhere else.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto keys = server::ApiKeys::load(o.api_key, o.api_key_file);
  if (!keys.ok()) {
    // The message names the flag; the value is a secret and is not repeated.
    const std::string from = o.api_key_from.empty() ? "" : " (from " + o.api_key_from + ")";
    return usage_error("serve", invalid_argument(keys.status().message() + from));
  }
  auto gemm = resolve_gemm_option(o.gemm);
  if (!gemm.ok()) return usage_error("serve", gemm.status());
  const std::string id = o.alias.empty() ? runtime::served_model_id(o.model) : o.alias;
  server::Service service(id.empty() ? "tandem" : id, std::move(*keys), static_cast<size_t>(o.max_body));
  service.set_model_path(o.model);
  service.set_model_match(o.model_match == "any" ? server::ModelMatch::any : server::ModelMatch::strict);
  auto pooling = o.http.pooling.empty() ? server::declared_pooling(o.model).value_or(server::Pooling::mean)
                 : o.http.pooling == "last" ? server::Pooling::last
                                            : server::Pooling::mean;
  service.set_embeddings(o.http.embeddings, pooling);
  server::HttpServer http(service, o.http);
  if (Status s = http.bind(); !s.ok()) {
    spdlog::error("{}", s.message());
    return 1;
  }
  std::thread http_thread([&] { http.run(); });
  spdlog::info("listening on http://{}:{} (loading {}; /health answers 503 until ready)", o.host, http.port(),
               o.model);
  auto fail = [&](const Status& s) {
    spdlog::error("{}", s.to_string());
    http.stop();
    http_thread.join();
    return 1;
  };
  // A signal while loading: nothing is in flight (requests get 503), so stop at once.
  auto stopped_while_loading = [&](int sig) {
    if (sig == 0) return false;
    spdlog::info("signal {} while loading: stopping", sig);
    http.stop();
    http_thread.join();
    spdlog::info("stopped");
    return true;
  };

  // TANDEM_LOAD_DELAY_MS: hold the loading state this long (for testing readiness probes).
  if (stopped_while_loading(
          pending_signal(signals, std::chrono::milliseconds(env_int_or("TANDEM_LOAD_DELAY_MS", 0)))))
    return 0;
  const auto t0 = std::chrono::steady_clock::now();
  // Progress: a live line on a terminal, a log line per quarter otherwise.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  int logged_quarter = 0;
  auto progress = [&](int done, int total) {
    if (tty) {
      std::fprintf(stderr, "\rloading %s: layer %d/%d", o.model.c_str(), done, total);
      if (done == total) std::fprintf(stderr, "\n");
      return;
    }
    const int quarter = done * 4 / total;
    if (quarter > logged_quarter) {
      logged_quarter = quarter;
      spdlog::info("loading {}: {} of {} layers", o.model, done, total);
    }
  };
  // The drafter shares the engine's kernel threads: it runs on the engine thread between target steps.
  o.drafter.max_tokens = o.context > 0 ? o.context : 4096;
  runtime::OpenOptions open{o.model, o.drafter, o.threads};
  open.weights = o.weights_quant;
  open.progress = progress;
  open.chat_template = o.chat_template;
  open.device = o.device;
  auto opened = runtime::open_model(open);
  if (!opened.ok()) return fail(opened.status());
  if (stopped_while_loading(pending_signal(signals, std::chrono::milliseconds(0)))) return 0;
  spdlog::info("loaded {} ({} parameters, {:.1f} MB of weights per token) in {:.2f} s", o.model,
               opened->model->parameter_count(), opened->model->weight_bytes_per_token() / 1e6,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!opened->text.generation.empty())
    spdlog::info("generation_config.json: {}", opened->text.generation.describe());
  server::RequestDefaults defaults = server::resolve_request_defaults(o.sampling, opened->text.generation);
  defaults.chat_template_kwargs = o.chat_template_kwargs;
  // What a request that omits a field gets (the request > flags > generation_config.json > built-in).
  spdlog::info("request defaults: {}", defaults.description);
  if (o.grammar.compiled) {
    if (!opened->text.tokenizer)
      return fail(invalid_argument(o.grammar.description +
                                   ": a grammar needs the model's tokenizer.json, and this model has none"));
    defaults.grammar = o.grammar.compiled;
    defaults.grammar_gbnf = o.grammar.gbnf;
    spdlog::info("grammar of requests without their own ({}; docs/grammar.md)", o.grammar.description);
  }
  scheduler::EngineConfig ec;
  ec.max_running = o.parallel;
  ec.prefill_budget = o.batch;
  if (const char* rows = std::getenv("TANDEM_CUDA_CHUNK_ROWS"); rows != nullptr && std::atol(rows) > 0)
    ec.forward_rows = std::atol(rows);  // a measurement knob (docs/environment.md)
  ec.prefix_cache = !o.no_prefix_cache;
  ec.context = o.context;
  ec.threads = o.threads;
  auto policy_env = policy_env_from_env();
  if (!policy_env.ok()) return fail(policy_env.status());
  ec.policy_env = *policy_env;
  ec.allow_inexact = allow_inexact_from_env();
  ec.gemm = *gemm;
  ec.drafter_dir = o.drafter.dir.empty() && o.drafter.has_drafter() ? o.model : o.drafter.dir;
  auto served = runtime::make_served_model(std::move(*opened), ec);
  if (!served.ok()) return fail(served.status());
  served->engine->start();
  service.attach(std::move(*served), std::move(defaults));
  spdlog::info("ready: model '{}' on {}, context {} tokens, {} parallel sequences", service.model_id(),
               service.engine()->device().description(), service.engine()->context(), o.parallel);
  spdlog::info("cpu kernels: {}, bf16 weights x {} activations", kernels::isa_name(kernels::active_isa()),
               kernels::activations_name(kernels::active_activations()));

  int sig = 0;
  sigwait(&signals, &sig);
  const int drain_ms = static_cast<int>(env_int_or("TANDEM_SHUTDOWN_DRAIN_MS", 5000));
  spdlog::info("signal {}: shutting down (in-flight requests get {} ms to finish)", sig, drain_ms);
  service.begin_shutdown();
  service.engine()->shutdown(std::chrono::milliseconds(drain_ms));
  http.stop();
  http_thread.join();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto* o = new ServeOptions();  // lives for the process
  CLI::App* sub = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  add_serve_options(sub, *o);
  return {sub, [o] { return run_serve(*o); }};
}

}  // namespace tandem::app
