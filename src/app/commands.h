// Subcommand registry for the tandem binary. Each cmd_*.cpp adds its
// options to a CLI11 subcommand and returns the function that runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace tandem::app {

struct Command {
  CLI::App* sub;
  std::function<int()> run;  // process exit code
};
using CommandList = std::vector<Command>;

void register_commands(CLI::App& app, CommandList& out);

// Individual subcommands.
Command add_info_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_probe_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_stub_command(CLI::App& app, const char* name, const char* description);

}  // namespace tandem::app
