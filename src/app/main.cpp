// tandem: command-line entry point. Each subcommand lives in its own file
// (cmd_*.cpp) and registers itself on the CLI11 app here.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.h"
#include "core/log.h"

int main(int argc, char** argv) {
  tandem::init_logging();
  CLI::App app{"tandem: an exact, measured LLM inference server"};
  app.set_version_flag("--version", "tandem 0.1.0");
  app.require_subcommand(1);
  tandem::app::CommandList commands;
  tandem::app::register_commands(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& c : commands) {
    if (c.sub->parsed()) return c.run();
  }
  return 2;
}
