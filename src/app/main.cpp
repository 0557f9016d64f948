// tandem: command-line entry point. Each subcommand lives in its own file
// (cmd_*.cpp) and registers itself on the CLI11 app here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "core/log.h"

namespace {

// llama-server spells some flags with one dash and several letters (-md,
// -np); CLI11 only knows one-letter short flags, so they are rewritten to
// their long forms before parsing.
std::vector<std::string> llama_style_args(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (auto& a : args) {
    if (a == "-md") a = "--model-draft";
    if (a == "-np") a = "--parallel";
  }
  return args;
}

// llama-server reads LLAMA_ARG_<NAME> for its flags; the same names work here
// when the TANDEM_ spelling is unset (the TANDEM_ names are the documented ones).
void adopt_llama_env() {
  static const char* const kPairs[][2] = {
      {"TANDEM_HOST", "LLAMA_ARG_HOST"},         {"TANDEM_PORT", "LLAMA_ARG_PORT"},
      {"TANDEM_CTX_SIZE", "LLAMA_ARG_CTX_SIZE"}, {"TANDEM_PARALLEL", "LLAMA_ARG_N_PARALLEL"},
      {"TANDEM_THREADS", "LLAMA_ARG_THREADS"},   {"TANDEM_BATCH_SIZE", "LLAMA_ARG_BATCH"},
  };
  for (const auto& pair : kPairs) {
    const char* llama = std::getenv(pair[1]);
    if (std::getenv(pair[0]) == nullptr && llama != nullptr) setenv(pair[0], llama, 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  tandem::init_logging();
  adopt_llama_env();
  CLI::App app{"tandem: an exact, measured LLM inference server"};
  app.set_version_flag("--version", "tandem 0.1.0");
  app.require_subcommand(1);
  tandem::app::CommandList commands;
  tandem::app::register_commands(app, commands);
  try {
    std::vector<std::string> args = llama_style_args(argc, argv);
    std::vector<char*> ptrs;
    for (auto& a : args) ptrs.push_back(a.data());
    app.parse(static_cast<int>(ptrs.size()), ptrs.data());
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; any usage error exits 2 (CLI11's own codes vary).
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (auto& c : commands) {
    if (c.sub->parsed()) return c.run();
  }
  return 2;
}
