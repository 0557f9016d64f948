// `tandem serve`'s options: llama-server's flags where the concept is the
// same (docs/llama-server.md has the full table), each with its TANDEM_* and
// llama-server LLAMA_ARG_* variables (docs/environment.md: the flag wins,
// then TANDEM_*, then LLAMA_ARG_*). add_serve_options declares them;
// resolve_serve_options turns what was given into the values run_serve uses,
// after the environment was applied: every inconsistency or unsupported
// value is an InvalidArgument naming the flag (a start-up error, exit 2).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "drafter_setup.h"
#include "environment.h"
#include "llama_flags.h"
#include "model/config.h"
#include "runtime/chat_templates.h"
#include "serve_grammar.h"
#include "server/http_server.h"
#include "server/request_defaults.h"

namespace tandem::app {

struct ServeOptions {
  std::string weights;                                              // --weights
  model::WeightsQuant weights_quant = model::WeightsQuant::stored;  // resolved at start-up
  std::string model;
  std::string alias;
  DrafterOptions drafter;
  std::string host = "127.0.0.1";
  int port = 8080;
  int64_t context = 0;
  int parallel = 4;
  int64_t batch = 256;
  bool no_prefix_cache = false;
  std::string api_key, api_key_file;
  std::string api_key_from;  // the variables the keys came from, when no flag gave them ("" otherwise)
  int threads = 0;
  std::string gemm;
  std::string device;      // --device / -dev (TANDEM_DEVICE, LLAMA_ARG_DEVICE), normalized by resolve
  std::string gpu_layers;  // -ngl / --n-gpu-layers (LLAMA_ARG_N_GPU_LAYERS), as given
  CLI::Option *device_option = nullptr, *gpu_layers_option = nullptr;
  // Where each came from, for errors: the flag, or the variable that filled it ("" when neither).
  std::string device_from, gpu_layers_from;
  int64_t max_body = 8 << 20;
  std::vector<EnvMirror> mirrors;  // flags that TANDEM_* / LLAMA_ARG_* variables mirror
  LlamaFlagValues llama;           // llama-server's flags tandem does not act on (llama_flags.h)
  ServeGrammarFlags grammar;       // --grammar, --grammar-file, -j, -jf (serve_grammar.h)

  // As given (resolve_serve_options reads them; see the option's help).
  struct Given {
    float temp = 0, top_p = 0, min_p = 0, repeat_penalty = 0, presence_penalty = 0, frequency_penalty = 0;
    int32_t top_k = 0;
    int64_t n_predict = 0, seed = 0;
    std::string chat_template, chat_template_file, chat_template_kwargs;
    bool verbose = false, log_disable = false;
    int verbosity = 3;
    bool cache_prompt = true;
    int64_t cache_ram = 0;
    int draft_max = 0, draft_min = 0;
    std::string spec_type;
    int threads_http = -1;
    int embd_normalize = 2;
  } given;
  std::string model_match = "strict";          // --model-match: a request's unknown `model` (ADR 0017)
  std::vector<CLI::Option*> sampling_options;  // --temp ... --seed, in ServerSamplingFlags' order
  CLI::Option *n_predict_option = nullptr, *chat_template_option = nullptr,
              *chat_template_file_option = nullptr, *chat_template_kwargs_option = nullptr,
              *verbose_option = nullptr, *verbosity_option = nullptr, *log_disable_option = nullptr,
              *cache_prompt_option = nullptr, *cache_ram_option = nullptr, *draft_max_option = nullptr,
              *draft_min_option = nullptr, *spec_type_option = nullptr;

  // Resolved by resolve_serve_options.
  server::HttpOptions http;
  server::ServerSamplingFlags sampling;
  runtime::ChatTemplateChoice chat_template;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
};

void add_serve_options(CLI::App* sub, ServeOptions& o);

// After apply_env_mirrors: the llama-server table's verdicts, the sampling
// defaults, the chat template, the log level, the drafter's K from
// --draft-max, the HTTP options, the server's grammar. Reads --chat-template-file
// and the grammar flags' files.
Status resolve_serve_options(ServeOptions& o);

}  // namespace tandem::app
