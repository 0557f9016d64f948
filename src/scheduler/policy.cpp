#include "scheduler/policy.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/cpu_features.h"
#include "core/env.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "core/sha256.h"
#include "kernels/ops.h"
#include "scheduler/policy_report.h"

namespace tandem::scheduler {
namespace {

namespace fs = std::filesystem;

double round2(double v) { return std::round(v * 100.0) / 100.0; }

constexpr const char* kIntervalCleared = "interval_cleared";
constexpr const char* kMaxSamples = "max_samples";

const char* verdict_name(bool v) { return v ? "enable" : "decline"; }

}  // namespace

const char* policy_state_name(PolicyState state) {
  switch (state) {
    case PolicyState::forced:
      return "forced";
    case PolicyState::profiling:
      return "profiling";
    case PolicyState::settled:
      return "settled";
  }
  return "profiling";
}

std::string PolicyKey::text() const {
  return target + "|" + drafter + "|" + hardware + "|K" + std::to_string(block_size);
}

Expected<PolicyEnv> PolicyEnv::parse(const Lookup& lookup) {
  PolicyEnv e;
  std::string errors;
  auto flag = [&](const char* name, std::optional<bool>& out) {
    auto v = lookup(name);
    if (!v) return;
    if (auto b = parse_bool(*v)) {
      out = *b;
      return;
    }
    errors += (errors.empty() ? "" : "; ") + std::string(name) + "='" + *v +
              "' is not a boolean (use 1/true/yes/on or 0/false/no/off)";
  };
  flag("TANDEM_MTP_ADAPTIVE", e.adaptive);
  flag("TANDEM_ENABLE_MTP_B1", e.force);
  if (auto dir = lookup("TANDEM_CACHE_DIR"); dir && !dir->empty()) {
    e.cache_dir = *dir;
  } else if (auto home = lookup("HOME"); home && !home->empty()) {
    e.cache_dir = *home + "/.cache/tandem";
  }
  if (!errors.empty()) return invalid_argument(errors);
  return e;
}

bool static_default_for(const std::string& hardware) {
  return hardware.rfind("cpu:", 0) == 0 || hardware.rfind("cuda:", 0) == 0;
}

std::string hardware_label(int threads) {
  // bf16 activations (ADR 0082) run at another speed than f32: their own verdict, as the GPU's
  // GEMM-input numerics; the f32 label keeps its old spelling (and its hint files).
  const bool bf16 = kernels::active_activations() == kernels::Activations::bf16;
  return "cpu:" + cpu_features().model_name + "|t" + std::to_string(threads) + "|" +
         kernels::isa_name(kernels::active_isa()) + (bf16 ? "|x bf16" : "");
}

std::string hardware_label(const model::DeviceInfo& device, int threads) {
  if (device.device == "cpu") return hardware_label(threads);
  // A GPU the runtime could not describe still gets a label of its own kind.
  return "cuda:" + (device.model.empty() ? std::string("unknown GPU") : device.model) + "|" +
         (device.sm.empty() ? std::string("sm_?") : device.sm) + "|" +
         std::to_string(device.multiprocessors) + "sm|driver " +
         (device.driver.empty() ? std::string("?") : device.driver) +
         (device.numerics.empty() ? std::string() : "|x " + device.numerics);
}

std::optional<AdaptivePolicy> AdaptivePolicy::create(const PolicyKey& key, const PolicyEnv& env) {
  AdaptivePolicy p;
  p.key_ = key;
  p.env_ = env;
  p.rule_ = VerdictRule{static_default_for(key.hardware)};
  if (!env.cache_dir.empty())
    p.hint_path_ = env.cache_dir + "/mtp-policy/" + sha256_hex(key.text()).substr(0, 16) + ".json";
  if (env.force) {
    p.state_ = PolicyState::forced;
    p.forced_on_ = *env.force;
    return p;
  }
  if (env.adaptive && !*env.adaptive) return std::nullopt;
  p.load_hint();
  return p;
}

void AdaptivePolicy::load_hint() {
  state_ = PolicyState::profiling;
  if (hint_path_.empty()) return;
  if (int n = remove_stale_temp_files(hint_path_))
    spdlog::info("speculation policy: removed {} stale temporary hint file(s) beside {}", n, hint_path_);
  std::error_code ec;
  if (!fs::exists(hint_path_, ec)) return;  // first run for this key: profile
  auto warn = [&](const std::string& why) {
    spdlog::warn("speculation policy: ignoring hint {}: {}; profiling again (block_size={})", hint_path_, why,
                 key_.block_size);
    reprofile_reason_ = "hint rejected: " + why;
  };
  auto text = read_text_file(hint_path_);
  if (!text.ok()) return warn(text.status().message());
  auto hint = parse_hint(*text, key_, env_.kernel_version, rule_);
  if (!hint.ok()) return warn(hint.status().message());
  SpeedupEstimate e;
  e.samples = hint->samples;
  e.acceptance_rate = hint->acceptance_rate;
  e.speedup = hint->speedup;
  e.log_stddev = hint->speedup_log_stddev;
  e.low = hint->speedup_low;
  e.high = hint->speedup_high;
  e.has_interval = true;
  settled_estimate_ = e;
  verdict_ = hint->verdict;
  acceptance_rate_ = hint->acceptance_rate;
  samples_ = hint->samples;
  settle_reason_ = hint->settle_reason;
  verdict_source_ = "hint";
  state_ = PolicyState::settled;
  spdlog::info(
      "speculation policy: settled from {}: verdict {} (speedup {:.3f} in [{:.3f}, {:.3f}], {}; acceptance "
      "{:.2f}, {} samples, block_size={})",
      hint_path_, verdict_name(verdict_), e.speedup, e.low, e.high, settle_reason_, acceptance_rate_,
      samples_, key_.block_size);
}

bool AdaptivePolicy::should_run() const {
  switch (state_) {
    case PolicyState::forced:
      return forced_on_;
    case PolicyState::profiling:
      return true;
    case PolicyState::settled:
      return verdict_ || check_due_;
  }
  return false;
}

bool AdaptivePolicy::sampling() const {
  return state_ == PolicyState::profiling || (state_ == PolicyState::settled && (verdict_ || check_due_));
}

bool AdaptivePolicy::wants_plain_step(uint64_t request) const {
  if (!sampling()) return false;
  auto it = open_.find(request);
  if (it == open_.end()) return false;  // no speculative round yet: warm up first
  return it->second.rounds >= kWarmupRounds &&
         static_cast<int>(it->second.plain_ms.size()) < kPlainStepsPerRequest;
}

void AdaptivePolicy::record_plain_step(uint64_t request, double ms) {
  if (sampling()) open_[request].plain_ms.push_back(ms);
}

void AdaptivePolicy::record_round(uint64_t request, double round_ms, int32_t drafted, int32_t accepted) {
  if (!sampling()) return;
  PolicySample& s = open_[request];
  s.rounds++;
  s.round_ms += round_ms;
  s.drafted += drafted;
  s.accepted += accepted;
}

void AdaptivePolicy::request_finished(uint64_t request) {
  std::optional<PolicySample> sample;
  if (auto it = open_.find(request); it != open_.end()) {
    sample = std::move(it->second);
    open_.erase(it);
  }
  const bool qualifies = sample && sample->qualifies();
  if (state_ == PolicyState::settled && !verdict_ && !check_due_ && !qualifies &&
      ++finished_since_check_ >= kDeclineCheckEvery)
    check_due_ = true;  // the next B=1 request checks the decline
  if (!qualifies) return;
  if (state_ == PolicyState::settled) return monitor(std::move(*sample));
  if (state_ != PolicyState::profiling) return;
  done_.push_back(std::move(*sample));
  const int n = static_cast<int>(done_.size());
  if (n < kSamplesRequired) return;
  const SpeedupEstimate e = estimate_speedup(done_);
  if (rule_.confident(e)) return settle(e, kIntervalCleared);
  if (n >= kSamplesMax) return settle(e, kMaxSamples);
  spdlog::info(
      "speculation policy: {} samples, speedup {:.3f} in [{:.3f}, {:.3f}] (log stddev {:.3f}) straddles the "
      "threshold {:.2f}; sampling more (at most {}) (block_size={})",
      n, e.speedup, e.low, e.high, e.log_stddev, rule_.threshold(), kSamplesMax, key_.block_size);
}

void AdaptivePolicy::settle(const SpeedupEstimate& e, const char* reason) {
  const std::optional<bool> confident = rule_.confident(e);
  verdict_ = confident ? *confident : rule_.verdict(e.speedup);
  acceptance_rate_ = e.acceptance_rate;
  samples_ = e.samples;
  last_speedup_ = e.speedup;
  settled_estimate_ = e;
  settle_reason_ = reason;
  verdict_source_ = "measured";
  state_ = PolicyState::settled;
  window_.clear();
  served_speedup_.reset();
  contradicting_windows_ = 0;
  finished_since_check_ = 0;
  check_due_ = false;
  spdlog::info(
      "speculation policy settled: verdict {} — estimated speedup {:.3f} = (accepted_len {:.3f} + 1) x "
      "classic_step_ms {:.3f} / round_ms {:.3f}; {}; 95% interval [{:.3f}, {:.3f}] (log stddev {:.3f}) "
      "against "
      "threshold {:.2f}: {}; acceptance {:.2f} ({} of {} drafts), {} rounds, {} samples; hardware={} "
      "block_size={}",
      verdict_name(verdict_), e.speedup, e.accepted_len, e.classic_step_ms, e.round_ms, rule_.zone(e.speedup),
      e.low, e.high, e.log_stddev, rule_.threshold(), reason, acceptance_rate_, e.accepted, e.drafted,
      e.rounds, samples_, key_.hardware, key_.block_size);
  done_.clear();
  write_hint();
}

void AdaptivePolicy::monitor(PolicySample sample) {
  if (!verdict_) {  // a decline's spot check is done
    check_due_ = false;
    finished_since_check_ = 0;
  }
  window_.push_back(std::move(sample));
  if (static_cast<int>(window_.size()) < kMonitorWindow) return;
  const SpeedupEstimate e = estimate_speedup(window_);
  window_.clear();
  served_speedup_ = e.speedup;
  const std::optional<bool> says = rule_.confident(e);
  contradicting_windows_ = says && *says != verdict_ ? contradicting_windows_ + 1 : 0;
  spdlog::info(
      "speculation policy: served speedup {:.3f} in [{:.3f}, {:.3f}] over {} samples, verdict {}, threshold "
      "{:.2f}; "
      "{} consecutive window(s) against it (block_size={})",
      e.speedup, e.low, e.high, e.samples, verdict_name(verdict_), rule_.threshold(), contradicting_windows_,
      key_.block_size);
  if (contradicting_windows_ < kContradictingWindows) return;
  char why[256];
  std::snprintf(
      why, sizeof why,
      "served speedup %.2f [%.2f, %.2f] contradicts verdict %s (threshold %.2f) in %d consecutive windows",
      e.speedup, e.low, e.high, verdict_name(verdict_), rule_.threshold(), contradicting_windows_);
  reprofile(why);
}

void AdaptivePolicy::reprofile(const std::string& why) {
  spdlog::warn("speculation policy: reprofile: {}; profiling again from scratch (block_size={})", why,
               key_.block_size);
  reprofile_reason_ = why;
  reprofiles_++;
  state_ = PolicyState::profiling;
  verdict_ = false;
  settled_estimate_.reset();
  settle_reason_.clear();
  verdict_source_.clear();
  done_.clear();
  window_.clear();
  served_speedup_.reset();
  contradicting_windows_ = 0;
  check_due_ = false;
  finished_since_check_ = 0;
  // A restart before the policy settles again must not trust the contradicted verdict.
  if (!hint_path_.empty()) {
    std::error_code ec;
    fs::remove(hint_path_, ec);
  }
}

PolicySnapshot AdaptivePolicy::snapshot() const {
  PolicySnapshot s;
  s.state = state_;
  s.mtp_enabled = should_run();
  s.last_speedup = last_speedup_;
  s.reprofiles = reprofiles_;
  if (!reprofile_reason_.empty()) s.reprofile_reason = reprofile_reason_;
  auto set_estimate = [&s](const SpeedupEstimate& e) {
    s.speedup = e.speedup;
    if (!e.has_interval) return;
    s.speedup_log_stddev = e.log_stddev;
    s.speedup_low = e.low;
    s.speedup_high = e.high;
  };
  if (state_ == PolicyState::settled) {
    s.verdict = verdict_;
    s.acceptance_rate = round2(acceptance_rate_);
    s.samples = samples_;
    s.threshold = rule_.threshold();
    if (settled_estimate_) set_estimate(*settled_estimate_);
    s.settle_reason = settle_reason_;
    s.verdict_source = verdict_source_;
    s.served_speedup = served_speedup_;
    s.contradicting_windows = contradicting_windows_;
  } else if (state_ == PolicyState::profiling) {
    s.samples = static_cast<int>(done_.size());
    s.threshold = rule_.threshold();
    if (!done_.empty()) {
      const SpeedupEstimate e = estimate_speedup(done_);
      if (e.drafted > 0) s.acceptance_rate = e.acceptance_rate;
      if (e.has_interval) set_estimate(e);
    }
  }
  return s;
}

void AdaptivePolicy::write_hint() const {
  if (hint_path_.empty()) {
    spdlog::warn(
        "speculation policy: no cache directory (set TANDEM_CACHE_DIR or HOME); the verdict lives in memory "
        "only");
    return;
  }
  Hint h;
  h.kernel_version = env_.kernel_version;
  h.verdict = verdict_;
  h.acceptance_rate = acceptance_rate_;
  h.samples = samples_;
  h.speedup = settled_estimate_->speedup;
  h.speedup_log_stddev = settled_estimate_->log_stddev;
  h.speedup_low = settled_estimate_->low;
  h.speedup_high = settled_estimate_->high;
  h.settle_reason = settle_reason_;
  if (Status s = write_file_atomically(hint_path_, hint_json(key_, h)); !s.ok())
    spdlog::warn("speculation policy: cannot persist the verdict ({}); the verdict lives in memory only",
                 s.message());
}

void describe_policy(const PolicySnapshot& s, PolicyReport& r) {
  r.state = policy_state_name(s.state);
  r.reason.reset();
  r.mtp_enabled = s.mtp_enabled;
  r.samples = s.state == PolicyState::forced ? 0 : s.samples;
  r.acceptance_rate = s.acceptance_rate;
  r.last_speedup = s.last_speedup;
  if (s.state == PolicyState::settled) r.verdict = *s.verdict ? "enable" : "decline";
  if (s.state == PolicyState::profiling)  // until the minimum; past it, the most it may still take
    r.samples_remaining =
        s.samples < kSamplesRequired ? kSamplesRequired - s.samples : kSamplesMax - s.samples;
  r.speedup = s.speedup;
  r.speedup_log_stddev = s.speedup_log_stddev;
  r.speedup_low = s.speedup_low;
  r.speedup_high = s.speedup_high;
  r.speedup_threshold = s.threshold;
  r.settle_reason = s.settle_reason;
  r.verdict_source = s.verdict_source;
  r.reprofile_reason = s.reprofile_reason;
  r.reprofiles = s.reprofiles;
  r.served_speedup = s.served_speedup;
  r.contradicting_windows = s.contradicting_windows;
}

}  // namespace tandem::scheduler
