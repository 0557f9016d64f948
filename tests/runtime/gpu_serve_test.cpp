// What `tandem serve --device cuda` runs, bitwise (issue 17, ADR 0030): the
// engine that runtime::open_model + make_served_model build on the GPU, as
// the server does. A request's tokens are the same alone, among 64
// concurrent requests (chunked prefill interleaved with decode), with and
// without prefix-cache hits, with and without a drafter (the bundled
// draft model and MTP head in the B=1 speculative slot), and with closed-loop
// clients joining a decoding batch — greedy and seeded.
//
// Label "gpu": without a CUDA device every test reports "skipped: no CUDA
// device". TANDEM_TEST_DEVICE=cpu runs the same checks on the CPU (they hold
// there too; it checks the test itself on a machine without a GPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "model/device.h"
#include "runtime/opened_model.h"

namespace tandem::runtime {
namespace {

using scheduler::EngineRequest;
using scheduler::FinishReason;

constexpr int kRequests = 64;
constexpr int kTokens = 32;

std::string device() {
  const char* d = std::getenv("TANDEM_TEST_DEVICE");
  return d && *d ? d : "cuda";
}

std::string models_dir() {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root && *root ? root : ".") + "/models/";
}

#define SKIP_WITHOUT_DEVICE() \
  if (device() != "cpu" && !::tandem::model::cuda_available()) GTEST_SKIP() << "skipped: no CUDA device"

struct EngineSetup {
  std::string drafter;  // "", "tandem-draft", "tandem-mtp"
  bool prefix_cache = true;
  int max_running = 1;
};

std::unique_ptr<scheduler::Engine> start(const EngineSetup& s) {
  OpenOptions o;
  o.model_dir = models_dir() + "tandem-target";
  o.threads = 2;
  o.device = device();
  if (!s.drafter.empty()) {
    o.drafter.dir = models_dir() + s.drafter;
    o.drafter.block_size = 4;
    o.drafter.block_size_rule = "--draft-block-size";
  }
  auto opened = open_model(o);
  EXPECT_TRUE(opened.ok()) << opened.status().to_string();
  if (!opened.ok()) return nullptr;
  EXPECT_EQ(model::device_name(opened->model->placement()), device() == "cpu" ? "cpu" : "cuda:0");
  scheduler::EngineConfig c;
  c.max_running = s.max_running;
  c.prefill_budget = 48;  // chunked prefill, interleaved with the others' decode steps
  c.context = 256;
  c.threads = 2;
  c.prefix_cache = s.prefix_cache;
  c.policy_env.force = true;  // speculate whenever the slot allows; no hint files
  c.drafter_dir = o.drafter.dir;
  auto served = make_served_model(std::move(*opened), c);
  EXPECT_TRUE(served.ok()) << served.status().to_string();
  if (!served.ok()) return nullptr;
  served->engine->start();
  return std::move(served->engine);
}

// Request i: a 40-token prefix that most requests share (a cached prefix for all
// but the first; more than one 32-token KV block), then a suffix of its own.
std::shared_ptr<EngineRequest> request(int i, float temperature) {
  auto r = std::make_shared<EngineRequest>();
  r->id = static_cast<uint64_t>(i + 1);
  const bool shares = i % 4 != 3;
  for (int p = 0; p < 40; ++p) r->prompt.push_back(shares ? 100 + p * 13 : 50 + (i * 37 + p * 11) % 8000);
  for (int p = 0; p < 3 + i % 9; ++p) r->prompt.push_back(20 + (i * 131 + p * 17) % 8000);
  r->params.temperature = temperature;
  r->params.top_p = 0.95f;
  r->params.seed = 7000 + static_cast<uint64_t>(i);
  r->max_tokens = kTokens;
  return r;
}

struct Result {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::none;
  scheduler::RequestStats stats;
};

Result collect(const std::shared_ptr<EngineRequest>& r) {
  Result out;
  while (out.finish == FinishReason::none) {
    std::vector<scheduler::RequestUpdate> updates;
    if (!r->channel->pop_all(updates, std::chrono::seconds(120))) {
      ADD_FAILURE() << "request " << r->id << " timed out";
      break;
    }
    for (auto& u : updates) {
      for (auto& t : u.tokens) out.tokens.push_back(t.token);
      if (u.finish != FinishReason::none) {
        out.finish = u.finish;
        out.stats = u.stats;
        EXPECT_TRUE(u.error.ok()) << u.error.to_string();
      }
    }
  }
  return out;
}

// Requests `ids`, one after the other (each alone in the engine).
std::vector<Result> one_at_a_time(scheduler::Engine& e, const std::vector<int>& ids, float temperature) {
  std::vector<Result> out;
  for (int i : ids) {
    auto r = request(i, temperature);
    EXPECT_TRUE(e.submit(r).ok());
    out.push_back(collect(r));
  }
  return out;
}

std::vector<int> all_ids() {
  std::vector<int> ids;
  for (int i = 0; i < kRequests; ++i) ids.push_back(i);
  return ids;
}

class GpuServe : public ::testing::TestWithParam<float> {};

TEST_P(GpuServe, AloneEqualsAmong64ConcurrentAndWithPrefixHits) {
  SKIP_WITHOUT_DEVICE();
  const float temperature = GetParam();
  // The reference: each request alone, prefix cache off.
  std::vector<Result> alone;
  {
    auto e = start({"", /*prefix_cache=*/false, 1});
    ASSERT_TRUE(e);
    alone = one_at_a_time(*e, all_ids(), temperature);
  }
  for (const auto& r : alone) {
    ASSERT_EQ(r.finish, FinishReason::length);
    ASSERT_EQ(r.tokens.size(), static_cast<size_t>(kTokens));
    EXPECT_EQ(r.stats.cached_tokens, 0);
  }
  {  // Alone again, with the prefix cache: every request after the first reuses the shared prefix.
    auto e = start({"", true, 1});
    ASSERT_TRUE(e);
    auto cached = one_at_a_time(*e, all_ids(), temperature);
    int64_t hits = 0;
    for (int i = 0; i < kRequests; ++i) {
      EXPECT_EQ(cached[i].tokens, alone[i].tokens) << "request " << i << " with a prefix-cache hit";
      hits += cached[i].stats.cached_tokens > 0;
    }
    EXPECT_GE(hits, kRequests / 2) << "requests that reused a cached prefix";
  }
  {  // All 64 at once: prefills chunked and interleaved with decode, prefix hits among them.
    auto e = start({"", true, kRequests});
    ASSERT_TRUE(e);
    std::vector<std::shared_ptr<EngineRequest>> reqs;
    for (int i = 0; i < kRequests; ++i) reqs.push_back(request(i, temperature));
    for (auto& r : reqs) ASSERT_TRUE(e->submit(r).ok());
    for (int i = 0; i < kRequests; ++i)
      EXPECT_EQ(collect(reqs[i]).tokens, alone[i].tokens) << "request " << i << " among 64";
  }
}

TEST_P(GpuServe, SpeculativeSlotEqualsClassicWithBothDrafterKinds) {
  SKIP_WITHOUT_DEVICE();
  const float temperature = GetParam();
  const std::vector<int> ids = {0, 1, 3, 6, 11, 17, 30, 63};
  std::vector<Result> classic;
  {
    auto e = start({"", false, 1});
    ASSERT_TRUE(e);
    classic = one_at_a_time(*e, ids, temperature);
  }
  for (const char* drafter : {"tandem-draft", "tandem-mtp"}) {
    SCOPED_TRACE(drafter);
    auto e = start({drafter, true, 4});
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->has_drafter());
    ASSERT_TRUE(e->gate().decide(4).allowed) << e->gate().decide(4).decline_reason.value_or("");
    auto spec = one_at_a_time(*e, ids, temperature);
    int64_t rounds = 0, accepted = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, classic[i].tokens) << "request " << ids[i];
      rounds += spec[i].stats.spec_rounds;
      accepted += spec[i].stats.accepted_tokens;
    }
    EXPECT_GT(rounds, 0) << "the speculative slot never ran";
    std::printf("%s, T=%.1f: %lld rounds, %lld drafts accepted\n", drafter, temperature,
                static_cast<long long>(rounds), static_cast<long long>(accepted));
    // The drafter is on the target's device and the policy's label names it.
    const auto report = e->policy_board().read();
    ASSERT_TRUE(report.hardware.has_value());
    EXPECT_EQ(report.hardware->rfind(device() == "cpu" ? "cpu:" : "cuda:", 0), 0u) << *report.hardware;
  }
}

// Closed-loop clients (each submits its next request when the last one ends)
// with max_tokens of their own, so requests join and leave a decoding batch
// at many steps: on a GPU the engine queues decode steps ahead (ADR 0090) and
// holds a new request back while one is queued. Every request's tokens are
// the first max_tokens of its tokens alone, and nothing hangs.
TEST_P(GpuServe, ClosedLoopClientsJoiningMidDecodeEqualAlone) {
  SKIP_WITHOUT_DEVICE();
  const float temperature = GetParam();
  constexpr int kClients = 4, kEach = 4;
  std::vector<int> ids;
  for (int i = 0; i < kClients * kEach; ++i) ids.push_back(i * 3);
  std::vector<Result> alone;
  {
    auto e = start({"", false, 1});
    ASSERT_TRUE(e);
    alone = one_at_a_time(*e, ids, temperature);
  }
  auto e = start({"", false, 8});
  ASSERT_TRUE(e);
  std::vector<Result> got(ids.size());
  std::vector<int> limits(ids.size());
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int j = 0; j < kEach; ++j) {
        const size_t k = static_cast<size_t>(c * kEach + j);
        auto r = request(ids[k], temperature);
        r->max_tokens = limits[k] = 5 + (ids[k] * 7 + c) % (kTokens - 4);
        if (!e->submit(r).ok()) {
          ADD_FAILURE() << "submit " << ids[k];
          return;
        }
        got[k] = collect(r);
      }
    });
  }
  for (auto& t : clients) t.join();
  for (size_t k = 0; k < ids.size(); ++k) {
    ASSERT_EQ(got[k].finish, FinishReason::length) << "request " << ids[k];
    const std::vector<int32_t> want(alone[k].tokens.begin(), alone[k].tokens.begin() + limits[k]);
    EXPECT_EQ(got[k].tokens, want) << "request " << ids[k] << " (max_tokens " << limits[k] << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(GreedyAndSeeded, GpuServe, ::testing::Values(0.0f, 0.8f),
                         [](const auto& info) { return info.param == 0.0f ? "greedy" : "seeded"; });

}  // namespace
}  // namespace tandem::runtime
