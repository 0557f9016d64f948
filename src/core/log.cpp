#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/env.h"

namespace tandem {

void init_logging() {
  auto logger = spdlog::stderr_color_mt("tandem");
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::info);
  if (auto level = env_string("TANDEM_LOG_LEVEL"))
    spdlog::set_level(spdlog::level::from_str(to_lower(*level)));
}

}  // namespace tandem
