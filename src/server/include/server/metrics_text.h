// Prometheus text exposition (format 0.0.4) of the engine's metrics, with
// vLLM's metric names under the `tandem:` prefix so dashboards carry over.
#pragma once

#include <string>

#include "scheduler/metrics.h"
#include "scheduler/policy_report.h"

namespace tandem::server {

std::string metrics_text(const scheduler::EngineMetrics& m, const scheduler::PolicyReport& policy);

}  // namespace tandem::server
