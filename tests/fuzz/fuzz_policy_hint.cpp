// Fuzz target: a speculation-policy hint file (scheduler/policy.h) -> the
// policy's own loader. The input is written where AdaptivePolicy::create()
// looks for the hint of a fixed key; anything malformed must mean "profile
// again" (a WARN), never a crash.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "scheduler/policy.h"

namespace {

using namespace tandem::scheduler;

const PolicyKey& key() {
  static const PolicyKey k{"/models/t", "/models/d", "cpu:fuzz|t2|avx2", 4};
  return k;
}

PolicyEnv& env() {
  static PolicyEnv e = [] {
    PolicyEnv v;
    v.adaptive = true;
    v.cache_dir =
        (std::filesystem::temp_directory_path() / ("tandem-fuzz-hint-" + std::to_string(::getpid())))
            .string();
    return v;
  }();
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    auto p = AdaptivePolicy::create(key(), env());
    std::filesystem::create_directories(std::filesystem::path(p->hint_path()).parent_path());
    std::atexit([] { std::filesystem::remove_all(env().cache_dir); });
    return p->hint_path();
  }();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto p = AdaptivePolicy::create(key(), env());
  if (!p) std::abort();  // adaptive is on: there is always a policy
  PolicySnapshot s = p->snapshot();
  if (s.state == PolicyState::settled && (!s.verdict || s.samples < kSamplesRequired)) std::abort();
  (void)p->should_run();
  return 0;
}
