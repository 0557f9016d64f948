// The adaptive policy's state machine, estimator and hint files, with an
// injected environment (no server, no model).
#include "scheduler/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kernels/ops.h"

namespace tandem::scheduler {
namespace {

namespace fs = std::filesystem;

PolicyKey key() { return {"/m/target", "/m/draft", "cpu:Test CPU|t2|avx512", 4}; }

PolicyEnv env_in(const std::string& name) {
  PolicyEnv e;
  e.cache_dir = ::testing::TempDir() + "tandem_policy_" + name;
  fs::remove_all(e.cache_dir);
  return e;
}

// One profiled request as the engine drives it (ADR 0003): kWarmupRounds
// speculative rounds, then the plain steps, then the rest of its rounds.
void feed(AdaptivePolicy& p, uint64_t id, double step_ms, double round_ms, int rounds, int accepted) {
  ASSERT_GE(rounds, kWarmupRounds);
  for (int r = 0; r < kWarmupRounds; ++r) {
    ASSERT_FALSE(p.wants_plain_step(id)) << "round " << r;
    p.record_round(id, round_ms, 3, accepted);
  }
  ASSERT_TRUE(p.wants_plain_step(id));
  p.record_plain_step(id, step_ms);
  ASSERT_TRUE(p.wants_plain_step(id));
  p.record_plain_step(id, step_ms);
  ASSERT_FALSE(p.wants_plain_step(id));
  for (int r = kWarmupRounds; r < rounds; ++r) p.record_round(id, round_ms, 3, accepted);
  p.request_finished(id);
}

TEST(AdaptivePolicy, ForcedAndDisabled) {
  PolicyEnv e = env_in("forced");
  e.force = true;
  auto on = AdaptivePolicy::create(key(), e);
  ASSERT_TRUE(on);
  EXPECT_EQ(on->state(), PolicyState::forced);
  EXPECT_TRUE(on->should_run());
  EXPECT_FALSE(on->wants_plain_step(1));
  e.force = false;
  EXPECT_FALSE(AdaptivePolicy::create(key(), e)->should_run());
  PolicyEnv off = env_in("off");
  off.adaptive = false;
  EXPECT_FALSE(AdaptivePolicy::create(key(), off).has_value());
  off.force = true;  // a pin wins over disabled adaptation
  EXPECT_EQ(AdaptivePolicy::create(key(), off)->state(), PolicyState::forced);
}

TEST(AdaptivePolicy, ProfilesFourSamplesThenSettlesAndPersists) {
  PolicyEnv e = env_in("settle");
  auto p = AdaptivePolicy::create(key(), e);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->state(), PolicyState::profiling);
  EXPECT_TRUE(p->should_run());
  // A request that never ran a real round does not count.
  p->record_plain_step(99, 10);
  p->request_finished(99);
  EXPECT_EQ(p->snapshot().samples, 0);
  for (uint64_t id = 1; id <= 3; ++id) {
    feed(*p, id, 10.0, 12.0, 5, 2);
    EXPECT_EQ(p->snapshot().samples, static_cast<int>(id));
    EXPECT_EQ(p->state(), PolicyState::profiling);
  }
  feed(*p, 4, 10.0, 12.0, 5, 2);
  // speedup = (2 + 1) * 10 / 12 = 2.5 -> enable; acceptance 2/3.
  EXPECT_EQ(p->state(), PolicyState::settled);
  auto s = p->snapshot();
  EXPECT_EQ(s.verdict, std::optional<bool>(true));
  EXPECT_DOUBLE_EQ(*s.last_speedup, 2.5);
  EXPECT_DOUBLE_EQ(*s.acceptance_rate, 0.67);
  EXPECT_EQ(s.samples, 4);
  ASSERT_TRUE(fs::exists(p->hint_path()));
  // A restart with the same cache settles at once, without profiling.
  auto again = AdaptivePolicy::create(key(), e);
  EXPECT_EQ(again->state(), PolicyState::settled);
  EXPECT_TRUE(again->should_run());
  EXPECT_FALSE(again->wants_plain_step(1));
  // Another key (block size) does not reuse it.
  PolicyKey k8 = key();
  k8.block_size = 8;
  EXPECT_EQ(AdaptivePolicy::create(k8, e)->state(), PolicyState::profiling);
}

TEST(AdaptivePolicy, EstimatorZones) {
  struct Case {
    double step_ms, round_ms;
    int accepted;
    bool verdict;
  };
  // speedup = (accepted + 1) * step / round
  const Case cases[] = {
      {10, 40, 1, false},  // 0.5: decline
      {10, 20, 1, false},  // 1.0: decline (<= 1.0)
      {10, 16, 1, true},   // 1.25: static default for a CPU = enable
      {10, 12, 1, true},   // 1.67: enable
  };
  int n = 0;
  for (const auto& c : cases) {
    auto p = AdaptivePolicy::create(key(), env_in("zone" + std::to_string(n++)));
    for (uint64_t id = 1; id <= 4; ++id) feed(*p, id, c.step_ms, c.round_ms, 3, c.accepted);
    EXPECT_EQ(p->snapshot().verdict, std::optional<bool>(c.verdict)) << c.step_ms << " " << c.round_ms;
  }
  EXPECT_FALSE(static_default_for("gpu:Some GPU|sm132"));
}

// A hint as the policy writes it after four identical samples of speedup 2.5.
nlohmann::json good_hint() {
  return {{"version", kHintVersion},
          {"kernel_version", kernels::kKernelVersion},
          {"target", "/m/target"},
          {"drafter", "/m/draft"},
          {"hardware", "cpu:Test CPU|t2|avx512"},
          {"block_size", 4},
          {"verdict", "enable"},
          {"acceptance_rate", 0.67},
          {"samples", 4},
          {"speedup", 2.5},
          {"speedup_log_stddev", 0.0},
          {"speedup_low", 2.5},
          {"speedup_high", 2.5},
          {"settle_reason", "interval_cleared"}};
}

TEST(AdaptivePolicy, TheHintRecordsSpreadCountIntervalAndVersions) {
  PolicyEnv e = env_in("hintbody");
  auto p = AdaptivePolicy::create(key(), e);
  for (uint64_t id = 1; id <= 4; ++id) feed(*p, id, 10.0, 12.0, 5, 2);
  ASSERT_EQ(p->state(), PolicyState::settled);
  std::ifstream in(p->hint_path());
  const nlohmann::json written = nlohmann::json::parse(in);
  EXPECT_EQ(written, good_hint()) << written.dump(2);
  auto again = AdaptivePolicy::create(key(), e);
  const PolicySnapshot s = again->snapshot();
  EXPECT_EQ(s.state, PolicyState::settled);
  EXPECT_EQ(s.verdict_source, std::optional<std::string>("hint"));
  EXPECT_EQ(s.settle_reason, std::optional<std::string>("interval_cleared"));
  EXPECT_EQ(s.speedup_low, std::optional<double>(2.5));
  EXPECT_EQ(s.samples, 4);
  EXPECT_FALSE(s.reprofile_reason);
}

TEST(AdaptivePolicy, BadHintsMeanReprofileNeverACrash) {
  PolicyEnv e = env_in("bad");
  auto p = AdaptivePolicy::create(key(), e);
  const std::string path = p->hint_path();
  fs::create_directories(fs::path(path).parent_path());
  auto with = [](const char* field, nlohmann::json value) {
    nlohmann::json j = good_hint();
    j[field] = std::move(value);
    return j.dump();
  };
  auto without = [](const char* field) {
    nlohmann::json j = good_hint();
    j.erase(field);
    return j.dump();
  };
  nlohmann::json issue = good_hint();  // issue 13: served as settled before hints were validated
  issue["acceptance_rate"] = 7.5;
  issue["samples"] = 1000000;
  nlohmann::json wide = good_hint();  // an interval that straddles the threshold cannot be "cleared"
  wide["speedup_log_stddev"] = 1.0;
  wide["speedup_low"] = 2.5 * std::exp(-3.182 * 1.0 / 2.0);  // 0.51
  wide["speedup_high"] = 2.5 * std::exp(3.182 * 1.0 / 2.0);
  nlohmann::json capped = good_hint();  // max_samples needs the cap and the point estimate's verdict
  capped["settle_reason"] = "max_samples";
  nlohmann::json contradicted = good_hint();
  contradicted["verdict"] = "decline";
  struct Case {
    std::string body, why;  // `why`: a piece of the WARN
  };
  const Case cases[] = {
      {"", "malformed JSON"},
      {"{\"version\": 2, \"target\"", "malformed JSON"},
      {"[1, 2, 3]", "not a JSON object"},
      {with("version", 99), "version 99 is not 2"},
      {with("version", 1), "version 1 is not 2"},
      {with("version", "2"), "is not 2"},
      {without("version"), "version null"},
      {with("kernel_version", kernels::kKernelVersion + 1), "kernel version"},
      {with("kernel_version", "1"), "kernel_version is not an integer"},
      {without("kernel_version"), "missing field kernel_version"},
      {with("target", "/other"), "another key (target)"},
      {with("drafter", "/other"), "another key (drafter)"},
      {with("hardware", "cpu:Other|t2|avx512"), "another key (hardware)"},
      {with("block_size", 8), "another key (block_size)"},
      {with("verdict", 7), "verdict is not a string"},
      {with("verdict", "maybe"), "verdict 'maybe'"},
      {issue.dump(), "samples = 1000000 is outside [4, 12]"},
      {with("samples", 3), "samples = 3 is outside"},
      {with("samples", 4.5), "samples is not an integer"},
      {with("acceptance_rate", 7.5), "acceptance_rate = 7.5 is outside [0.0, 1.0]"},
      {with("acceptance_rate", -0.1), "acceptance_rate = -0.1 is outside"},
      {with("acceptance_rate", "0.5"), "acceptance_rate is not a number"},
      {without("acceptance_rate"), "missing field acceptance_rate"},
      {with("speedup", 0.0), "speedup must be above 0"},
      {with("speedup", 1e9), "speedup = 1000000000.0 is outside"},
      {with("speedup", nullptr), "speedup is not a number"},
      {with("speedup_log_stddev", -1.0), "speedup_log_stddev = -1.0 is outside"},
      {without("speedup_log_stddev"), "missing field speedup_log_stddev"},
      {with("speedup_low", 3.0), "outside its own interval"},
      {with("speedup_high", 9.0), "does not follow from"},
      {with("settle_reason", "vibes"), "settle_reason 'vibes'"},
      {without("settle_reason"), "missing field settle_reason"},
      {wide.dump(), "not what its interval clears"},
      {capped.dump(), "max_samples with 4 samples"},
      {contradicted.dump(), "not what its interval clears"},
  };
  for (const Case& c : cases) {
    std::ofstream(path, std::ios::trunc) << c.body;
    auto q = AdaptivePolicy::create(key(), e);
    EXPECT_EQ(q->state(), PolicyState::profiling) << c.body;
    const auto why = q->snapshot().reprofile_reason;
    ASSERT_TRUE(why) << c.body;
    EXPECT_EQ(why->rfind("hint rejected: ", 0), 0u) << *why;
    EXPECT_NE(why->find(c.why), std::string::npos) << "reason: " << *why << "\nwanted: " << c.why;
  }
  // The control: the good body, and unknown extra fields, are accepted.
  nlohmann::json extra = good_hint();
  extra["comment"] = "fields a later version adds are ignored";
  for (const std::string& body : {good_hint().dump(), extra.dump()}) {
    std::ofstream(path, std::ios::trunc) << body;
    EXPECT_EQ(AdaptivePolicy::create(key(), e)->state(), PolicyState::settled) << body;
  }
}

TEST(AdaptivePolicy, AHintFromAnotherKernelVersionIsReprofiled) {
  PolicyEnv e = env_in("kernel");
  auto p = AdaptivePolicy::create(key(), e);
  for (uint64_t id = 1; id <= 4; ++id) feed(*p, id, 10.0, 12.0, 5, 2);
  ASSERT_EQ(AdaptivePolicy::create(key(), e)->state(), PolicyState::settled);
  PolicyEnv upgraded = e;  // the same cache, read by a build whose kernels changed
  upgraded.kernel_version = kernels::kKernelVersion + 1;
  auto q = AdaptivePolicy::create(key(), upgraded);
  EXPECT_EQ(q->state(), PolicyState::profiling);
  EXPECT_EQ(*q->snapshot().reprofile_reason,
            "hint rejected: it was measured with kernel version " + std::to_string(kernels::kKernelVersion) +
                ", this build runs " + std::to_string(kernels::kKernelVersion + 1));
  // Once it settles again, the hint carries the new version and the old build rejects it in turn.
  for (uint64_t id = 1; id <= 4; ++id) feed(*q, id, 10.0, 12.0, 5, 2);
  EXPECT_EQ(AdaptivePolicy::create(key(), upgraded)->state(), PolicyState::settled);
  EXPECT_EQ(AdaptivePolicy::create(key(), e)->state(), PolicyState::profiling);
}

TEST(PolicyEnv, MalformedFlagsAreErrorsNotOn) {
  auto lookup = [](std::map<std::string, std::string> vars) {
    return [vars](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  };
  auto none = PolicyEnv::parse(lookup({{"HOME", "/home/u"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->adaptive);
  EXPECT_FALSE(none->force);
  EXPECT_EQ(none->cache_dir, "/home/u/.cache/tandem");
  EXPECT_EQ(none->kernel_version, kernels::kKernelVersion);
  auto set = PolicyEnv::parse(lookup({{"TANDEM_MTP_ADAPTIVE", " Off "},
                                      {"TANDEM_ENABLE_MTP_B1", "YES"},
                                      {"TANDEM_CACHE_DIR", "/c"},
                                      {"HOME", "/home/u"}}));
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->adaptive, std::optional<bool>(false));
  EXPECT_EQ(set->force, std::optional<bool>(true));
  EXPECT_EQ(set->cache_dir, "/c");
  auto bad = PolicyEnv::parse(lookup({{"TANDEM_ENABLE_MTP_B1", "maybe"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "TANDEM_ENABLE_MTP_B1='maybe' is not a boolean (use 1/true/yes/on or 0/false/no/off)");
  auto both = PolicyEnv::parse(lookup({{"TANDEM_MTP_ADAPTIVE", "2"}, {"TANDEM_ENABLE_MTP_B1", ""}}));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("TANDEM_MTP_ADAPTIVE='2'"), std::string::npos);
  EXPECT_NE(both.status().message().find("TANDEM_ENABLE_MTP_B1=''"), std::string::npos);
}

TEST(AdaptivePolicy, UnwritableCacheKeepsTheVerdictInMemory) {
  PolicyEnv e;
  e.cache_dir = "/proc/tandem-cannot-write-here";
  auto p = AdaptivePolicy::create(key(), e);
  for (uint64_t id = 1; id <= 4; ++id) feed(*p, id, 10, 12, 3, 2);
  EXPECT_EQ(p->state(), PolicyState::settled);
  EXPECT_TRUE(p->should_run());
}

TEST(HardwareLabel, NamesCpuThreadsAndIsa) {
  const std::string l = hardware_label(3);
  EXPECT_EQ(l.rfind("cpu:", 0), 0u);
  EXPECT_NE(l.find("|t3|"), std::string::npos);
  EXPECT_NE(hardware_label(1), hardware_label(2));
  // bf16 activations (ADR 0082) get their own label, as the GPU's numerics do.
  EXPECT_EQ(l.find("|x "), std::string::npos);
  kernels::select_activations(kernels::Activations::bf16);
  EXPECT_EQ(hardware_label(3), l + "|x bf16");
  kernels::select_activations(kernels::Activations::f32);
  EXPECT_EQ(hardware_label(3), l);
}

// A GPU's label names its model, SM version, multiprocessors and driver, and is
// never a CPU's: the two verdicts cannot share a hint file (ADR 0030).
TEST(HardwareLabel, NamesTheGpuModelSmAndDriver) {
  model::DeviceInfo h200{"cuda:0", "NVIDIA H200", "sm_90", "580.159.04", 132};
  const std::string l = hardware_label(h200, 2);
  EXPECT_EQ(l, "cuda:NVIDIA H200|sm_90|132sm|driver 580.159.04");
  EXPECT_TRUE(static_default_for(l));
  model::DeviceInfo cpu;
  cpu.device = "cpu";
  EXPECT_EQ(hardware_label(cpu, 2), hardware_label(2));
  EXPECT_NE(hardware_label(cpu, 2), l);
  // The device index is not part of it; another driver or SM version is.
  model::DeviceInfo second = h200;
  second.device = "cuda:1";
  EXPECT_EQ(hardware_label(second, 2), l);
  model::DeviceInfo other_driver = h200;
  other_driver.driver = "575.57.08";
  EXPECT_NE(hardware_label(other_driver, 2), l);
  model::DeviceInfo h100 = h200;
  h100.model = "NVIDIA H100 80GB HBM3";
  EXPECT_NE(hardware_label(h100, 2), l);
  // The GEMM-input numerics (ADR 0054) are part of it: bf16 and f32 x run at different speeds.
  model::DeviceInfo bf16 = h200, f32 = h200;
  bf16.numerics = "bf16";
  f32.numerics = "f32";
  EXPECT_EQ(hardware_label(bf16, 2), l + "|x bf16");
  EXPECT_NE(hardware_label(bf16, 2), hardware_label(f32, 2));
  // A device the runtime could not describe still gets a GPU label, not an empty one.
  model::DeviceInfo unknown;
  unknown.device = "cuda:0";
  EXPECT_EQ(hardware_label(unknown, 2), "cuda:unknown GPU|sm_?|0sm|driver ?");
}

TEST(HardwareLabel, ReadsTheNvidiaKernelModuleVersion) {
  // The file's first line as the NVIDIA driver writes it.
  EXPECT_EQ(model::nvidia_module_version(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                "(dvs-builder@U22-I3-AF03-09-1)  Thu Jun  5 10:52:44 UTC 2025\nGCC version:  gcc 12\n"),
            "580.159.04");
  EXPECT_EQ(
      model::nvidia_module_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug"),
      "535.104.05");
  EXPECT_EQ(model::nvidia_module_version(""), "");
  EXPECT_EQ(model::nvidia_module_version("Kernel Module  (none)"), "");
}

TEST(DeviceInfo, DescribesTheCpuAndAGpu) {
  EXPECT_EQ(model::describe_device(model::Placement{}).description(), "cpu");
  model::DeviceInfo h200{"cuda:0", "NVIDIA H200", "sm_90", "580.159.04", 132};
  EXPECT_EQ(h200.description(), "cuda:0 (NVIDIA H200, sm_90, 132 SMs, driver 580.159.04)");
  h200.numerics = "bf16";
  EXPECT_EQ(h200.description(), "cuda:0 (NVIDIA H200, sm_90, 132 SMs, driver 580.159.04, bf16 x)");
}

}  // namespace
}  // namespace tandem::scheduler
