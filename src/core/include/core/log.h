// Logging: spdlog with tandem's format. Call init_logging() once in main();
// afterwards use spdlog::info/warn/error anywhere (thread-safe).
// TANDEM_LOG_LEVEL (trace|debug|info|warn|error|off) overrides the default.
#pragma once

#include <spdlog/spdlog.h>

namespace tandem {

void init_logging();

}  // namespace tandem
