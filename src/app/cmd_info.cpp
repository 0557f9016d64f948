// `tandem info`: what this machine offers and what tandem will use.
#include <cstdio>
#include <thread>

#include "commands.h"
#include "core/cpu_features.h"

namespace tandem::app {

Command add_info_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("info", "Show CPU features and the kernel variant tandem selects");
  return {sub, [] {
            const auto& f = cpu_features();
            std::printf("cpu: %s\n", f.model_name.c_str());
            std::printf("hardware threads: %u\n", std::thread::hardware_concurrency());
            std::printf("features: %s\n", f.describe().c_str());
            return 0;
          }};
}

}  // namespace tandem::app
