// Prometheus text exposition (format 0.0.4) of the server's and the engine's
// metrics, with vLLM's metric names under the `tandem:` prefix so dashboards
// carry over. Every sample carries `model_name="<served id>"` (vLLM's label)
// before its own labels, so a dashboard that filters on it works unchanged.
//
// ServerMetrics are the server's own series, there from start-up (while the
// model loads, GET /metrics answers them alone): the server state and the
// finished choices by the finish_reason their clients were told — counted
// where the response is made (GenerationRun), so a request the server ends on
// a stop string counts as "stop", one whose client went away as "abort".
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "model/device.h"
#include "scheduler/metrics.h"
#include "scheduler/policy_report.h"

namespace tandem::server {

struct ServerMetrics {
  std::atomic<uint64_t> finished_stop{0};    // finish_reason "stop" (EOS, a stop token or a stop string)
  std::atomic<uint64_t> finished_length{0};  // "length"
  std::atomic<uint64_t> finished_abort{0};   // "abort": cancelled (client gone, shutdown)
};

// `state`: "loading", "ready" or "shutting_down"; `model_name`: the served model id.
std::string server_metrics_text(const ServerMetrics& s, const std::string& state,
                                const std::string& model_name);
// tandem:device_info{device="cuda:0",gpu="NVIDIA H200",sm="sm_90",driver="580.159.04"} 1
// (only device= for the CPU).
std::string device_metrics_text(const model::DeviceInfo& device, const std::string& model_name);
std::string engine_metrics_text(const scheduler::EngineMetrics& m, const scheduler::PolicyReport& policy,
                                const std::string& model_name);

// A label value in the text format's escaping: backslash, double quote and newline.
std::string escape_label_value(const std::string& value);

}  // namespace tandem::server
