// `tandem probe -m DIR -md DIR [--draft-block-size K] [--device D]`: runs the exactness
// gate (docs/spec-speculative.md §2) and prints the verdict and reason.
// Exit status: 0 when speculative decoding may engage, 3 when it is declined.
#include <cstdio>

#include "commands.h"
#include "common_options.h"
#include "drafter_setup.h"
#include "environment.h"
#include "runtime/opened_model.h"
#include "speculative/exactness.h"

namespace tandem::app {
namespace {

struct ProbeOptions {
  std::string model_dir;
  std::string weights;  // --weights
  DrafterOptions drafter;
  std::string gemm;
  std::string device;
  int threads = 0;
};

int run_probe(ProbeOptions o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tandem probe: %s\n", s.to_string().c_str());
    return 1;
  };
  auto checked = check_startup(o.drafter, o.gemm);  // exit 2 on any usage error
  if (!checked.ok()) return usage_error("probe", checked.status());
  const speculative::GemmRequest gemm = *checked;
  auto weights = resolve_weights_option(o.weights);
  if (!weights.ok()) return usage_error("probe", weights.status());
  if (!o.drafter.has_drafter())
    return usage_error("probe",
                       invalid_argument("-md/--model-draft DIR is required (or --draft-kind mtp for the "
                                        "target's own MTP layers)"));
  runtime::OpenOptions open{o.model_dir, o.drafter, o.threads};
  open.device = resolve_device_option(o.device);
  open.weights = *weights;
  auto opened = runtime::open_model(open);
  if (!opened.ok()) return fail(opened.status());
  const runtime::LoadedDrafter* drafter = &opened->drafter;
  speculative::ExactnessGate gate = opened->gate(allow_inexact_from_env(), gemm);
  const speculative::GateDecision& d = gate.decide(drafter->block_size);
  const char* verdict =
      d.exact ? "exact" : (d.allowed ? "inexact (engaged anyway: TANDEM_MTP_ALLOW_INEXACT)" : "declined");
  std::printf("verdict: %s\nblock_size: %d\nreason: %s\n", verdict, drafter->block_size,
              d.decline_reason.value_or(d.probe_reason).c_str());
  return d.allowed ? 0 : 3;
}

}  // namespace

Command add_probe_command(CLI::App& app) {
  auto o = std::make_shared<ProbeOptions>();
  CLI::App* sub =
      app.add_subcommand("probe", "Check that a verify block is byte-identical to single-token decode");
  add_model_option(sub, o->model_dir);
  add_drafter_options(sub, o->drafter, true);
  add_gemm_option(sub, o->gemm);
  add_device_option(sub, o->device);
  add_weights_option(sub, o->weights);
  add_threads_option(sub, o->threads);
  return {sub, [o] { return run_probe(*o); }};
}

}  // namespace tandem::app
