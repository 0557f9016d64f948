#include "commands.h"

#include <cstdio>

namespace tandem::app {

Command add_stub_command(CLI::App& app, const char* name, const char* description) {
  CLI::App* sub = app.add_subcommand(name, description);
  sub->allow_extras();
  std::string n = name;
  return {sub, [n] {
            std::fprintf(stderr, "tandem %s: not implemented yet\n", n.c_str());
            return 2;
          }};
}

void register_commands(CLI::App& app, CommandList& out) {
  out.push_back(add_serve_command(app));
  out.push_back(add_generate_command(app));
  out.push_back(add_probe_command(app));
  out.push_back(add_bench_command(app));
  out.push_back(add_info_command(app));
  out.push_back(add_tokenize_command(app));
}

}  // namespace tandem::app
