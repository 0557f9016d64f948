#include "scheduler/policy.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/cpu_features.h"
#include "core/env.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "core/sha256.h"
#include "kernels/ops.h"

namespace tandem::scheduler {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

double round2(double v) { return std::round(v * 100.0) / 100.0; }

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

PolicyEnv PolicyEnv::from_process() {
  static const PolicyEnv env = [] {
    PolicyEnv e;
    if (auto v = env_string("TANDEM_MTP_ADAPTIVE")) e.adaptive = parse_bool(*v).value_or(true);
    // Set: off values pin off, anything else pins on.
    if (auto v = env_string("TANDEM_ENABLE_MTP_B1")) e.force = parse_bool(*v).value_or(true);
    if (auto dir = env_string("TANDEM_CACHE_DIR"); dir && !dir->empty()) {
      e.cache_dir = *dir;
    } else if (auto home = env_string("HOME"); home && !home->empty()) {
      e.cache_dir = *home + "/.cache/tandem";
    }
    return e;
  }();
  return env;
}

bool static_default_for(const std::string& hardware) { return hardware.rfind("cpu:", 0) == 0; }

std::string hardware_label(int threads) {
  return "cpu:" + cpu_features().model_name + "|t" + std::to_string(threads) + "|" +
         kernels::isa_name(kernels::active_isa());
}

std::optional<AdaptivePolicy> AdaptivePolicy::create(const PolicyKey& key, const PolicyEnv& env) {
  AdaptivePolicy p;
  p.key_ = key;
  p.env_ = env;
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
  std::error_code ec;
  if (!fs::exists(hint_path_, ec)) return;  // first run for this key: profile
  auto warn = [&](const std::string& why) {
    spdlog::warn("speculation policy: ignoring hint {}: {}; profiling again (block_size={})", hint_path_, why,
                 key_.block_size);
  };
  auto text = read_text_file(hint_path_);
  if (!text.ok()) return warn(text.status().message());
  json j;
  try {
    j = json::parse(*text);
  } catch (const json::exception& e) {
    return warn(std::string("malformed JSON (") + e.what() + ")");
  }
  try {
    if (!j.is_object()) return warn("not a JSON object");
    if (j.value("version", -1) != kHintVersion)
      return warn("version " + j.value("version", json(nullptr)).dump() + " is not " +
                  std::to_string(kHintVersion));
    if (j.at("target") != key_.target || j.at("drafter") != key_.drafter ||
        j.at("hardware") != key_.hardware || j.at("block_size") != key_.block_size)
      return warn("it was written for another key");
    const std::string verdict = j.at("verdict").get<std::string>();
    if (verdict != "enable" && verdict != "decline")
      return warn("verdict '" + verdict + "' is not enable/decline");
    const int samples = j.at("samples").get<int>();
    if (samples < kSamplesRequired) return warn("only " + std::to_string(samples) + " samples");
    verdict_ = verdict == "enable";
    acceptance_rate_ = j.at("acceptance_rate").get<double>();
    samples_ = samples;
    state_ = PolicyState::settled;
    spdlog::info(
        "speculation policy: settled from {}: verdict {} (acceptance {:.2f}, {} samples, block_size={})",
        hint_path_, verdict, acceptance_rate_, samples_, key_.block_size);
  } catch (const json::exception& e) {
    warn(std::string("missing or mistyped field (") + e.what() + ")");
  }
}

bool AdaptivePolicy::should_run() const {
  switch (state_) {
    case PolicyState::forced:
      return forced_on_;
    case PolicyState::profiling:
      return true;
    case PolicyState::settled:
      return verdict_;
  }
  return false;
}

PolicySnapshot AdaptivePolicy::snapshot() const {
  PolicySnapshot s;
  s.state = state_;
  s.mtp_enabled = should_run();
  s.last_speedup = last_speedup_;
  if (state_ == PolicyState::settled) {
    s.verdict = verdict_;
    s.acceptance_rate = round2(acceptance_rate_);
    s.samples = samples_;
  } else if (state_ == PolicyState::profiling) {
    s.samples = static_cast<int>(done_.size());
    int64_t drafted = 0, accepted = 0;
    for (const auto& d : done_) drafted += d.drafted, accepted += d.accepted;
    if (drafted > 0) s.acceptance_rate = static_cast<double>(accepted) / static_cast<double>(drafted);
  }
  return s;
}

bool AdaptivePolicy::wants_plain_step(uint64_t request) const {
  if (state_ != PolicyState::profiling) return false;
  auto it = open_.find(request);
  if (it == open_.end()) return false;  // no speculative round yet: warm up first
  return it->second.rounds >= kWarmupRounds &&
         static_cast<int>(it->second.plain_ms.size()) < kPlainStepsPerRequest;
}

void AdaptivePolicy::record_plain_step(uint64_t request, double ms) {
  if (state_ == PolicyState::profiling) open_[request].plain_ms.push_back(ms);
}

void AdaptivePolicy::record_round(uint64_t request, double round_ms, int32_t drafted, int32_t accepted) {
  if (state_ != PolicyState::profiling) return;
  Sample& s = open_[request];
  s.rounds++;
  s.round_ms += round_ms;
  s.drafted += drafted;
  s.accepted += accepted;
}

void AdaptivePolicy::request_finished(uint64_t request) {
  auto it = open_.find(request);
  if (it == open_.end()) return;
  Sample s = std::move(it->second);
  open_.erase(it);
  if (state_ != PolicyState::profiling || s.rounds == 0 || s.plain_ms.empty()) return;
  done_.push_back(std::move(s));
  if (static_cast<int>(done_.size()) >= kSamplesRequired) settle();
}

void AdaptivePolicy::settle() {
  std::vector<double> plain_means;
  double round_total = 0;
  int64_t rounds = 0, drafted = 0, accepted = 0;
  for (const auto& s : done_) {
    plain_means.push_back(std::accumulate(s.plain_ms.begin(), s.plain_ms.end(), 0.0) /
                          static_cast<double>(s.plain_ms.size()));
    round_total += s.round_ms;
    rounds += s.rounds;
    drafted += s.drafted;
    accepted += s.accepted;
  }
  std::sort(plain_means.begin(), plain_means.end());
  const size_t n = plain_means.size();
  const double classic_step_ms =
      n % 2 ? plain_means[n / 2] : (plain_means[n / 2 - 1] + plain_means[n / 2]) / 2;
  const double round_ms = round_total / static_cast<double>(rounds);
  const double accepted_len = static_cast<double>(accepted) / static_cast<double>(rounds);
  const double speedup = (accepted_len + 1.0) * classic_step_ms / round_ms;
  const bool fallback = static_default_for(key_.hardware);
  std::string zone;
  if (speedup <= 1.0) {
    verdict_ = false;
    zone = "<= 1.0: decline";
  } else if (speedup >= 1.5) {
    verdict_ = true;
    zone = ">= 1.5: enable";
  } else {
    verdict_ = fallback;
    zone = std::string("between 1.0 and 1.5: static default for this hardware (") +
           (fallback ? "enable" : "decline") + ")";
  }
  acceptance_rate_ = drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  samples_ = static_cast<int>(done_.size());
  last_speedup_ = speedup;
  state_ = PolicyState::settled;
  spdlog::info(
      "speculation policy settled: verdict {} — estimated speedup {:.3f} = (accepted_len {:.3f} + 1) x "
      "classic_step_ms "
      "{:.3f} / round_ms {:.3f}; {}; acceptance {:.2f} ({} of {} drafts), {} rounds, {} samples; hardware={} "
      "block_size={}",
      verdict_ ? "enable" : "decline", speedup, accepted_len, classic_step_ms, round_ms, zone,
      acceptance_rate_, accepted, drafted, rounds, samples_, key_.hardware, key_.block_size);
  done_.clear();
  write_hint();
}

void AdaptivePolicy::write_hint() const {
  if (hint_path_.empty()) {
    spdlog::warn(
        "speculation policy: no cache directory (set TANDEM_CACHE_DIR or HOME); the verdict lives in memory "
        "only");
    return;
  }
  const json body = {{"version", kHintVersion},
                     {"target", key_.target},
                     {"drafter", key_.drafter},
                     {"hardware", key_.hardware},
                     {"block_size", key_.block_size},
                     {"verdict", verdict_ ? "enable" : "decline"},
                     {"acceptance_rate", round2(acceptance_rate_)},
                     {"samples", samples_}};
  std::error_code ec;
  const fs::path path(hint_path_);
  fs::create_directories(path.parent_path(), ec);
  const std::string tmp = hint_path_ + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << body.dump(2) << '\n';
    if (!out.good()) {
      spdlog::warn("speculation policy: cannot write {} ({}); the verdict lives in memory only", tmp,
                   ec ? ec.message() : "write failed");
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    spdlog::warn("speculation policy: cannot rename {} to {} ({}); the verdict lives in memory only", tmp,
                 hint_path_, ec.message());
    fs::remove(tmp, ec);
  }
}

}  // namespace tandem::scheduler
