// Hint files are written atomically: a writer SIGKILLed at random moments,
// 200 times, never leaves a partial hint, and the next start is clean.
#include "scheduler/policy_hint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "scheduler/policy.h"

namespace tandem::scheduler {
namespace {

namespace fs = std::filesystem;

PolicyKey key() { return {"/m/target", "/m/draft", "cpu:Test CPU|t2|avx512", 4}; }

// A valid hint whose acceptance rate tells the writes apart.
std::string hint_body(int i) {
  Hint h;
  h.kernel_version = kernels::kKernelVersion;
  h.verdict = true;
  h.acceptance_rate = (i % 100) / 100.0;
  h.samples = kSamplesRequired + i % (kSamplesMax - kSamplesRequired + 1);
  h.speedup = h.speedup_low = h.speedup_high = 2.0;
  h.settle_reason = "interval_cleared";
  return hint_json(key(), h);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int temp_files_beside(const std::string& path) {
  int n = 0;
  std::error_code ec;  // no directory yet: no files
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path(), ec))
    n += e.path().filename().string() != fs::path(path).filename().string();
  return n;
}

// A SIGKILL cannot interrupt a process inside fsync, so on a busy disk every
// kill waits for the writer's fsync; tmpfs (fsync is a no-op there) keeps
// the 200 kills to a second or two. Atomicity against a killed writer does
// not depend on the file system: the page cache survives the process.
std::string scratch_dir(const std::string& name) {
  std::error_code ec;
  const std::string shm = "/dev/shm";
  if (fs::is_directory(shm, ec) && ::access(shm.c_str(), W_OK) == 0) return shm + "/" + name;
  return ::testing::TempDir() + name;
}

TEST(HintFile, WritesAtomicallyAndReplaces) {
  const std::string dir = ::testing::TempDir() + "tandem_hint_write";
  fs::remove_all(dir);
  const std::string path = dir + "/sub/h.json";
  ASSERT_TRUE(write_file_atomically(path, hint_body(1)).ok());  // creates the directories
  EXPECT_EQ(read_all(path), hint_body(1));
  ASSERT_TRUE(write_file_atomically(path, hint_body(2)).ok());
  EXPECT_EQ(read_all(path), hint_body(2));
  EXPECT_EQ(temp_files_beside(path), 0);
  const Status s = write_file_atomically("/proc/tandem-no/h.json", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIo);
}

TEST(HintFile, StaleTemporaryFilesOfDeadWritersAreRemoved) {
  const std::string dir = ::testing::TempDir() + "tandem_hint_stale";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = dir + "/h.json";
  auto touch = [&](const std::string& name) { std::ofstream(dir + "/" + name) << "{\"partial"; };
  pid_t dead = fork();  // a pid that is certainly gone once reaped
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  touch("h.json.tmp." + std::to_string(dead));
  touch("h.json.tmp." + std::to_string(getpid()));  // a live writer (this process): kept
  touch("h.json.tmp.notapid");                      // not ours: kept
  touch("other.json.tmp." + std::to_string(dead));  // another hint's: kept
  EXPECT_EQ(remove_stale_temp_files(path), 1);
  EXPECT_FALSE(fs::exists(dir + "/h.json.tmp." + std::to_string(dead)));
  EXPECT_TRUE(fs::exists(dir + "/h.json.tmp." + std::to_string(getpid())));
  EXPECT_TRUE(fs::exists(dir + "/h.json.tmp.notapid"));
  EXPECT_TRUE(fs::exists(dir + "/other.json.tmp." + std::to_string(dead)));
}

TEST(HintFile, SigkillAtRandomMomentsNeverLeavesAPartialHint) {
  PolicyEnv env;
  env.cache_dir = scratch_dir("tandem_hint_sigkill_" + std::to_string(getpid()));
  fs::remove_all(env.cache_dir);
  const std::string path = AdaptivePolicy::create(key(), env)->hint_path();
  const VerdictRule rule{static_default_for(key().hardware)};
  std::mt19937 rng(20261201);  // deterministic kill moments
  std::uniform_int_distribution<int> delay_us(0, 3000);
  int present = 0, torn_temp = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int kill = 0; kill < 200; ++kill) {
    if (kill % 4 == 0) fs::remove(path);  // also kill writers that may not have renamed once yet
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (int i = kill * 1000;; ++i)
        if (!write_file_atomically(path, hint_body(i)).ok()) _exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer failed on its own, status " << status;
    torn_temp += temp_files_beside(path) > 0;
    if (!fs::exists(path)) continue;  // killed before its first rename: absent is fine
    ++present;
    const std::string text = read_all(path);
    auto hint = parse_hint(text, key(), kernels::kKernelVersion, rule);
    ASSERT_TRUE(hint.ok()) << "kill " << kill << ": " << hint.status().message() << "\n" << text;
    // The next start is clean: it trusts the hint and sweeps the dead writer's temporary file.
    auto next = AdaptivePolicy::create(key(), env);
    ASSERT_EQ(next->state(), PolicyState::settled) << kill;
    ASSERT_EQ(temp_files_beside(path), 0) << kill;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("present", present);
  RecordProperty("kills_mid_write", torn_temp);
  RecordProperty("seconds", std::to_string(seconds));
  EXPECT_GT(present, 50);   // most kills land after a completed write ...
  EXPECT_GT(torn_temp, 0);  // ... and some in the middle of one (the case under test)
  fs::remove_all(env.cache_dir);
}

}  // namespace
}  // namespace tandem::scheduler
