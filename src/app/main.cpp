// tandem: command-line entry point. Each subcommand lives in its own file
// (cmd_*.cpp) and registers itself on the CLI11 app here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "core/log.h"
#include "environment.h"
#include "llama_flags.h"

int main(int argc, char** argv) {
  tandem::init_logging();
  // TANDEM_LOG_LEVEL is every subcommand's; serve's LLAMA_ARG_* mirrors are
  // read with its flags (environment.h).
  if (tandem::Status s = tandem::app::apply_log_level(); !s.ok()) {
    std::fprintf(stderr, "tandem: %s\n", s.message().c_str());
    return 2;
  }
  CLI::App app{"tandem: an exact, measured LLM inference server"};
  app.set_version_flag("--version", "tandem 0.1.0");
  app.require_subcommand(1);
  tandem::app::CommandList commands;
  tandem::app::register_commands(app, commands);
  // llama-server's one-dash spellings (-ngl, -md, -np, ...) become long names (llama_flags.h).
  auto rewritten = tandem::app::rewrite_llama_spellings(app, std::vector<std::string>(argv, argv + argc));
  if (!rewritten.ok()) {
    std::string sub;  // the subcommand, when the error came after it
    for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
      for (const auto& c : commands)
        if (c.sub->get_name() == argv[i]) sub = argv[i];
      break;
    }
    std::fprintf(stderr, "tandem%s%s: %s\n", sub.empty() ? "" : " ", sub.c_str(),
                 rewritten.status().message().c_str());
    return 2;
  }
  try {
    std::vector<std::string> args = std::move(*rewritten);
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
