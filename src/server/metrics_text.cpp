#include "server/metrics_text.h"

#include <cmath>
#include <sstream>

namespace tandem::server {
namespace {

// Writes one exposition: every sample carries model_name="..." first (vLLM's
// label), then the series' own labels.
class Exposition {
 public:
  explicit Exposition(const std::string& model_name) : model_(escape_label_value(model_name)) {}

  void header(const char* name, const char* type, const char* help) {
    o_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  // `labels`: the series' own, already formatted (`state="ready"`), or "".
  template <typename T>
  void sample(const std::string& name, const std::string& labels, T value) {
    o_ << name << "{model_name=\"" << model_ << '"' << (labels.empty() ? "" : ",") << labels << "} " << value
       << '\n';
  }
  template <typename T>
  void scalar(const char* name, const char* type, const char* help, T value) {
    header(name, type, help);
    sample(name, "", value);
  }
  void histogram(const char* name, const char* help, const scheduler::Histogram& h) {
    header(name, "histogram", help);
    const auto s = h.snapshot();
    const std::string n = name;
    for (size_t i = 0; i < s.upper_bounds.size(); ++i) {
      std::ostringstream le;
      le << "le=\"" << s.upper_bounds[i] << '"';
      sample(n + "_bucket", le.str(), s.cumulative[i]);
    }
    sample(n + "_bucket", "le=\"+Inf\"", s.cumulative.back());
    sample(n + "_sum", "", s.sum);
    sample(n + "_count", "", s.count);
  }
  std::string str() const { return o_.str(); }

 private:
  std::string model_;
  std::ostringstream o_;
};

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string server_metrics_text(const ServerMetrics& s, const std::string& state,
                                const std::string& model_name) {
  Exposition o(model_name);
  o.header("tandem:server_state", "gauge",
           "Server state (1 for the current one): loading the model, ready, shutting down.");
  for (const char* st : {"loading", "ready", "shutting_down"})
    o.sample("tandem:server_state", std::string("state=\"") + st + '"', state == st ? 1 : 0);
  o.header("tandem:request_success_total", "counter",
           "Finished choices by the finish_reason their clients were told.");
  o.sample("tandem:request_success_total", "finished_reason=\"stop\"", s.finished_stop.load());
  o.sample("tandem:request_success_total", "finished_reason=\"length\"", s.finished_length.load());
  o.sample("tandem:request_success_total", "finished_reason=\"abort\"", s.finished_abort.load());
  return o.str();
}

std::string device_metrics_text(const model::DeviceInfo& d, const std::string& model_name) {
  Exposition o(model_name);
  o.header("tandem:device_info", "gauge",
           "Where the model runs (always 1): device cpu or cuda:N; for a GPU its model, SM version and "
           "driver.");
  std::string labels = "device=\"" + escape_label_value(d.device) + '"';
  if (!d.model.empty()) labels += ",gpu=\"" + escape_label_value(d.model) + '"';
  if (!d.sm.empty()) labels += ",sm=\"" + escape_label_value(d.sm) + '"';
  if (!d.driver.empty()) labels += ",driver=\"" + escape_label_value(d.driver) + '"';
  o.sample("tandem:device_info", labels, 1);
  return o.str();
}

std::string engine_metrics_text(const scheduler::EngineMetrics& m, const scheduler::PolicyReport& policy,
                                const std::string& model_name) {
  Exposition o(model_name);
  o.scalar("tandem:request_failure_total", "counter", "Requests that failed inside the engine.",
           m.requests_failed.load());
  o.scalar("tandem:request_no_allowed_token_total", "counter",
           "Requests ended where their own constraints (grammar, logit_bias) left no token (a 400).",
           m.requests_no_allowed_token.load());
  o.scalar("tandem:requests_received_total", "counter", "Requests accepted by the engine.",
           m.requests_total.load());
  o.scalar("tandem:prompt_tokens_total", "counter", "Prompt tokens prefilled.", m.prompt_tokens_total.load());
  o.scalar("tandem:generation_tokens_total", "counter", "Tokens generated.",
           m.generation_tokens_total.load());
  o.scalar("tandem:num_requests_running", "gauge", "Requests admitted (prefilling or decoding).",
           m.running.load());
  o.scalar("tandem:num_requests_waiting", "gauge", "Requests queued for admission.", m.queued.load());
  o.scalar("tandem:num_preemptions_total", "counter",
           "Running requests preempted; always 0: admission reserves a request's KV blocks up front and "
           "queues what does not fit, so tandem never preempts.",
           m.preemptions.load());
  const double total = static_cast<double>(m.kv_blocks_total.load());
  o.scalar("tandem:kv_cache_usage_perc", "gauge", "Fraction of KV-cache blocks in use (0..1).",
           total > 0 ? static_cast<double>(m.kv_blocks_used.load()) / total : 0.0);
  o.scalar("tandem:kv_cache_blocks_used", "gauge", "KV-cache blocks in use.", m.kv_blocks_used.load());
  o.scalar("tandem:kv_cache_blocks_total", "gauge", "KV-cache blocks in the pool.", m.kv_blocks_total.load());
  o.scalar("tandem:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
           m.prefix_cache_queries.load());
  o.scalar("tandem:prefix_cache_hits_total", "counter",
           "Prompt tokens found in the prefix cache (not prefilled).", m.prefix_cache_hits.load());
  o.scalar(
      "tandem:prefix_cache_blocks", "gauge",
      "KV-cache blocks the prefix cache holds (those no request uses count as free in kv_cache_usage_perc).",
      m.prefix_cache_blocks.load());
  o.histogram("tandem:time_to_first_token_seconds", "Time from arrival to first token.", m.ttft_seconds);
  o.histogram("tandem:inter_token_latency_seconds", "Time between consecutive tokens.",
              m.inter_token_seconds);
  o.histogram("tandem:e2e_request_latency_seconds",
              "Time from arrival to finish (stopped, length or cancelled; not engine failures).",
              m.e2e_request_latency_seconds);
  o.histogram("tandem:request_queue_time_seconds",
              "Time from arrival to admission of a request that waited for a free sequence or KV blocks; 0 "
              "for one admitted by the first engine step after it arrived.",
              m.request_queue_time_seconds);
  o.scalar("tandem:spec_decode_num_drafts_total", "counter", "Speculative rounds run.", m.spec_drafts.load());
  o.scalar("tandem:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.",
           m.spec_draft_tokens.load());
  o.scalar("tandem:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
           m.spec_accepted_tokens.load());
  o.header("tandem:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Draft tokens accepted, by position in the draft.");
  for (int p = 0; p < scheduler::kMaxSpecPositions; ++p)
    o.sample("tandem:spec_decode_num_accepted_tokens_per_pos_total", "position=\"" + std::to_string(p) + '"',
             m.spec_accepted_per_pos[p].load());
  o.header("tandem:mtp_policy_state", "gauge",
           "Speculation policy state (1 for the current one; see GET /v1/internal/mtp-policy).");
  for (const char* state : {"profiling", "settled", "forced", "exactness_declined", "unavailable"})
    o.sample("tandem:mtp_policy_state", std::string("state=\"") + state + '"', policy.state == state ? 1 : 0);
  o.scalar("tandem:mtp_policy_estimated_speedup", "gauge",
           "The adaptive policy's last estimated speculative speedup (NaN before it settles by measuring).",
           policy.last_speedup ? *policy.last_speedup : std::nan(""));
  return o.str();
}

}  // namespace tandem::server
