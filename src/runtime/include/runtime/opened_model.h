// Opening a model directory: the one loader every front end calls (serve,
// generate, probe, bench, bench -md; the server receives what it opened).
//
// open_model() loads, in order: the target (config.json read once, parsed
// into ModelConfig), its text side (runtime/text_side.h: tokenizer, chat
// template and the stop ids every front end stops on), the kernel thread
// pool, and — when options.drafter names one (a directory, or --draft-kind
// mtp alone) — the drafter with its kind and K (runtime/drafter_loader.h, its
// config.json read once). gate() builds
// the exactness gate for the target on that pool. start_engine() turns the
// bundle into what the server serves. Errors name the file at fault.
// `model_dir` may instead be a GGUF file (a path ending in .gguf): it is
// mapped and parsed once and gives the config, the weights and the text side
// (runtime/gguf_text_side.h); a split model opens from its first file.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/drafter_loader.h"
#include "runtime/text_side.h"
#include "scheduler/engine.h"
#include "speculative/exactness.h"

namespace tandem::runtime {

struct OpenOptions {
  std::string model_dir;   // a Hugging Face directory or a .gguf file
  DrafterOptions drafter;  // !drafter.has_drafter(): no drafter
  int threads = 0;         // kernel threads; 0: all hardware threads
  // false: with threads <= 1 the kernels run on the calling thread (pool is null).
  bool pool_for_one_thread = true;
  // "= {}": callers brace-initialize the first fields only (no -Wmissing-field-initializers).
  std::function<void(int, int)> progress = {};  // the target's layers loaded (done, total)
  ChatTemplateChoice chat_template = {};        // empty: the model's own (runtime/chat_templates.h)
  // Where the forwards run (model/device.h spelling): "cpu" (the default
  // here; serve keeps it until GPU serving lands); "auto" = cuda when a device
  // is present and the target's weights are bf16, else cpu; "cuda" /
  // "cuda:N" (an error when that cannot be). The drafter follows the target.
  std::string device = "cpu";
  // --weights / TANDEM_WEIGHTS: quantize the target's (and a draft model's)
  // matrices at load (model/weights_quant.h); stored keeps their precision.
  model::WeightsQuant weights = model::WeightsQuant::stored;
};

struct OpenedModel {
  std::unique_ptr<model::Model> model;
  TextSide text;
  std::unique_ptr<ThreadPool> pool;  // the kernels' threads, shared by the target and the drafter
  LoadedDrafter drafter;             // drafter.drafter null: none configured

  // The exactness gate for `model` on `pool` (the bundle must outlive it);
  // `allow_inexact`: TANDEM_MTP_ALLOW_INEXACT, as the app read it; `gemm`:
  // the requested matmul mode (--gemm / TANDEM_GEMM). The caller runs its
  // forwards with the gate's gemm_mode() once it decided.
  speculative::ExactnessGate gate(bool allow_inexact, speculative::GemmRequest gemm = {}) const;
};

Expected<OpenedModel> open_model(const OpenOptions& options);

// Loads a drafter into an opened bundle (open_model does when
// options.drafter.has_drafter(); a caller that sizes the drafter's cache from
// the tokenized prompt calls this afterwards). No-op without a drafter.
Status open_drafter(OpenedModel& opened, const DrafterOptions& options);

// What the server serves: the started-to-be engine and the text side.
struct ServedModel : TextSide {
  std::unique_ptr<scheduler::Engine> engine;
};

// Builds the engine from the bundle (target, drafter and pool move into it;
// config.block_size becomes the drafter's K). The engine is not started.
Expected<ServedModel> make_served_model(OpenedModel opened, scheduler::EngineConfig config);

}  // namespace tandem::runtime
