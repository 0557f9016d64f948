#include "server/metrics_text.h"

#include <cmath>
#include <sstream>

namespace tandem::server {
namespace {

void header(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

template <typename T>
void scalar(std::ostringstream& o, const char* name, const char* type, const char* help, T value) {
  header(o, name, type, help);
  o << name << ' ' << value << '\n';
}

void histogram(std::ostringstream& o, const char* name, const char* help, const scheduler::Histogram& h) {
  header(o, name, "histogram", help);
  const auto s = h.snapshot();
  for (size_t i = 0; i < s.upper_bounds.size(); ++i)
    o << name << "_bucket{le=\"" << s.upper_bounds[i] << "\"} " << s.cumulative[i] << '\n';
  o << name << "_bucket{le=\"+Inf\"} " << s.cumulative.back() << '\n';
  o << name << "_sum " << s.sum << '\n' << name << "_count " << s.count << '\n';
}

}  // namespace

std::string server_metrics_text(const ServerMetrics& s, const std::string& state) {
  std::ostringstream o;
  header(o, "tandem:server_state", "gauge",
         "Server state (1 for the current one): loading the model, ready, shutting down.");
  for (const char* st : {"loading", "ready", "shutting_down"})
    o << "tandem:server_state{state=\"" << st << "\"} " << (state == st ? 1 : 0) << '\n';
  header(o, "tandem:request_success_total", "counter",
         "Finished choices by the finish_reason their clients were told.");
  o << "tandem:request_success_total{finished_reason=\"stop\"} " << s.finished_stop.load() << '\n';
  o << "tandem:request_success_total{finished_reason=\"length\"} " << s.finished_length.load() << '\n';
  o << "tandem:request_success_total{finished_reason=\"abort\"} " << s.finished_abort.load() << '\n';
  return o.str();
}

std::string engine_metrics_text(const scheduler::EngineMetrics& m, const scheduler::PolicyReport& policy) {
  std::ostringstream o;
  scalar(o, "tandem:request_failure_total", "counter", "Requests that failed inside the engine.",
         m.requests_failed.load());
  scalar(o, "tandem:requests_received_total", "counter", "Requests accepted by the engine.",
         m.requests_total.load());
  scalar(o, "tandem:prompt_tokens_total", "counter", "Prompt tokens prefilled.",
         m.prompt_tokens_total.load());
  scalar(o, "tandem:generation_tokens_total", "counter", "Tokens generated.",
         m.generation_tokens_total.load());
  scalar(o, "tandem:num_requests_running", "gauge", "Requests admitted (prefilling or decoding).",
         m.running.load());
  scalar(o, "tandem:num_requests_waiting", "gauge", "Requests queued for admission.", m.queued.load());
  const double total = static_cast<double>(m.kv_blocks_total.load());
  scalar(o, "tandem:kv_cache_usage_perc", "gauge", "Fraction of KV-cache blocks in use (0..1).",
         total > 0 ? static_cast<double>(m.kv_blocks_used.load()) / total : 0.0);
  scalar(o, "tandem:kv_cache_blocks_used", "gauge", "KV-cache blocks in use.", m.kv_blocks_used.load());
  scalar(o, "tandem:kv_cache_blocks_total", "gauge", "KV-cache blocks in the pool.",
         m.kv_blocks_total.load());
  scalar(o, "tandem:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         m.prefix_cache_queries.load());
  scalar(o, "tandem:prefix_cache_hits_total", "counter",
         "Prompt tokens found in the prefix cache (not prefilled).", m.prefix_cache_hits.load());
  scalar(
      o, "tandem:prefix_cache_blocks", "gauge",
      "KV-cache blocks the prefix cache holds (those no request uses count as free in kv_cache_usage_perc).",
      m.prefix_cache_blocks.load());
  histogram(o, "tandem:time_to_first_token_seconds", "Time from arrival to first token.", m.ttft_seconds);
  histogram(o, "tandem:inter_token_latency_seconds", "Time between consecutive tokens.",
            m.inter_token_seconds);
  scalar(o, "tandem:spec_decode_num_drafts_total", "counter", "Speculative rounds run.",
         m.spec_drafts.load());
  scalar(o, "tandem:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.",
         m.spec_draft_tokens.load());
  scalar(o, "tandem:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
         m.spec_accepted_tokens.load());
  header(o, "tandem:spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Draft tokens accepted, by position in the draft.");
  for (int p = 0; p < scheduler::kMaxSpecPositions; ++p)
    o << "tandem:spec_decode_num_accepted_tokens_per_pos_total{position=\"" << p << "\"} "
      << m.spec_accepted_per_pos[p].load() << '\n';
  header(o, "tandem:mtp_policy_state", "gauge",
         "Speculation policy state (1 for the current one; see GET /v1/internal/mtp-policy).");
  for (const char* state : {"profiling", "settled", "forced", "exactness_declined", "unavailable"})
    o << "tandem:mtp_policy_state{state=\"" << state << "\"} " << (policy.state == state ? 1 : 0) << '\n';
  scalar(o, "tandem:mtp_policy_estimated_speedup", "gauge",
         "The adaptive policy's last estimated speculative speedup (NaN before it settles by measuring).",
         policy.last_speedup ? *policy.last_speedup : std::nan(""));
  return o.str();
}

}  // namespace tandem::server
