// The embedding forward on the bundled target model: an input's vector is
// bitwise the same alone, in a batch, in another order and when the batch is
// split over several forwards (the cache here holds two blocks); vectors are
// unit length; mean and last pooling agree with a plain Forward's final-norm
// hidden rows pooled here; an input longer than the cache is refused.
#include "server/embedder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "model/forward.h"
#include "model/model.h"

namespace tandem::server {
namespace {

std::unique_ptr<model::Model> load_target() {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  EXPECT_NE(root, nullptr) << "TANDEM_SOURCE_DIR is set by CTest";
  auto m = model::Model::load(std::string(root ? root : ".") + "/models/tandem-target");
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<int32_t> tokens(int n, int32_t salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((salt * 131 + i * 17) % 8000 + 10));
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The reference: a plain Forward's final-norm hidden rows, pooled and normalised here.
std::vector<float> reference(const model::Model& m, const std::vector<int32_t>& input, Pooling pooling) {
  auto kv = model::KvCache::create(m.config(), model::KvCache::options_for_tokens(256));
  EXPECT_TRUE(kv.ok());
  model::Forward fw(m, *kv, nullptr);
  model::SequenceStep step;
  step.seq = kv->create_sequence();
  step.tokens = input;
  step.logits = model::LogitRows::all;
  model::ForwardOptions options;
  options.hidden = model::HiddenOutput::after_final_norm;
  auto out = fw.run(std::span<const model::SequenceStep>(&step, 1), options);
  EXPECT_TRUE(out.ok());
  const int64_t hs = out->hidden_size, n = static_cast<int64_t>(input.size());
  const int64_t from = pooling == Pooling::mean ? 0 : n - 1;
  std::vector<double> sum(static_cast<size_t>(hs), 0.0);
  for (int64_t r = from; r < n; ++r)
    for (int64_t d = 0; d < hs; ++d)
      sum[static_cast<size_t>(d)] += out->hidden[static_cast<size_t>(r * hs + d)];
  double norm = 0;
  for (double& v : sum) {
    v /= static_cast<double>(n - from);
    norm += v * v;
  }
  std::vector<float> e;
  for (double v : sum) e.push_back(static_cast<float>(v / std::sqrt(norm)));
  return e;
}

TEST(Embedder, BatchInvariantAcrossBatchesOrdersAndForwards) {
  auto model = load_target();
  ASSERT_TRUE(model);
  // 40 tokens: a cache of two 32-token blocks, so the four inputs need three forwards.
  auto embedder = Embedder::create(*model, 40, Pooling::mean);
  ASSERT_TRUE(embedder.ok()) << embedder.status().to_string();
  const std::vector<std::vector<int32_t>> inputs = {tokens(30, 1), tokens(7, 2), tokens(40, 3), tokens(1, 4)};
  auto batch = (*embedder)->embed(inputs);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  ASSERT_EQ(batch->size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto alone = (*embedder)->embed({inputs[i]});
    ASSERT_TRUE(alone.ok());
    EXPECT_TRUE(same_bits((*alone)[0], (*batch)[i])) << "input " << i;
    double norm = 0;
    for (float v : (*batch)[i]) norm += static_cast<double>(v) * v;
    EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
    EXPECT_EQ(static_cast<int64_t>((*batch)[i].size()), (*embedder)->dimensions());
  }
  auto reversed = (*embedder)->embed({inputs[3], inputs[2], inputs[1], inputs[0]});
  ASSERT_TRUE(reversed.ok());
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_TRUE(same_bits((*reversed)[3 - i], (*batch)[i]));
}

TEST(Embedder, PoolingMatchesTheForwardsHiddenRows) {
  auto model = load_target();
  ASSERT_TRUE(model);
  const std::vector<int32_t> input = tokens(23, 5);
  for (Pooling pooling : {Pooling::mean, Pooling::last}) {
    auto embedder = Embedder::create(*model, 64, pooling);
    ASSERT_TRUE(embedder.ok());
    auto got = (*embedder)->embed({input});
    ASSERT_TRUE(got.ok());
    const std::vector<float> want = reference(*model, input, pooling);
    ASSERT_EQ((*got)[0].size(), want.size());
    // The final-norm rows are bitwise the same with or without logits; the pooling is the same sum.
    EXPECT_TRUE(same_bits((*got)[0], want)) << pooling_name(pooling);
  }
  auto mean = Embedder::create(*model, 64, Pooling::mean);
  auto last = Embedder::create(*model, 64, Pooling::last);
  EXPECT_FALSE(same_bits((*(*mean)->embed({input}))[0], (*(*last)->embed({input}))[0]));
}

TEST(Embedder, RefusesInputsItCannotHold) {
  auto model = load_target();
  ASSERT_TRUE(model);
  auto embedder = Embedder::create(*model, 16, Pooling::mean);
  ASSERT_TRUE(embedder.ok());
  auto too_long = (*embedder)->embed({tokens(4, 1), tokens(17, 2)});
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("input[1]"), std::string::npos) << too_long.status().message();
  EXPECT_FALSE((*embedder)->embed({{}}).ok());
}

// A batch stops between its forwards once keep_going says so (the client left, the deadline
// passed): a batch of 2048 inputs used to run to its end whatever happened to its request.
// With 40-token inputs and a two-block cache, each input is a forward of its own.
TEST(Embedder, StopsBetweenForwardsWhenAskedTo) {
  auto model = load_target();
  ASSERT_TRUE(model);
  auto embedder = Embedder::create(*model, 40, Pooling::mean);
  ASSERT_TRUE(embedder.ok());
  const std::vector<std::vector<int32_t>> inputs = {tokens(40, 1), tokens(40, 2), tokens(40, 3),
                                                    tokens(40, 4)};
  int asked = 0;
  auto stopped = (*embedder)->embed(inputs, [&asked] { return ++asked <= 2; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stopped.status().message().find("stopped after 2 of 4 inputs"), std::string::npos)
      << stopped.status().message();
  EXPECT_EQ(asked, 3) << "asked before each forward, not after the last one it refused";
  // The embedder is left as it was: the same inputs give the same vectors as a fresh one's.
  auto again = (*embedder)->embed(inputs, [] { return true; });
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  auto fresh = Embedder::create(*model, 40, Pooling::mean);
  auto want = (*fresh)->embed(inputs);
  ASSERT_TRUE(want.ok());
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_TRUE(same_bits((*again)[i], (*want)[i])) << i;
}

// A caller waiting for the embedder (another request's batch holds it) gives up once keep_going
// says so, instead of waiting out that batch.
TEST(Embedder, AWaitingCallerStopsWhenAskedTo) {
  auto model = load_target();
  ASSERT_TRUE(model);
  auto embedder = Embedder::create(*model, 40, Pooling::mean);
  ASSERT_TRUE(embedder.ok());
  std::atomic<bool> release{false}, holding{false};
  std::thread holder([&] {
    // Holds the embedder from inside its own keep_going until released.
    (void)(*embedder)->embed({tokens(4, 1)}, [&] {
      holding = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return true;
    });
  });
  while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto started = std::chrono::steady_clock::now();
  auto waited = (*embedder)->embed({tokens(4, 2)}, [&] {
    return std::chrono::steady_clock::now() - started < std::chrono::milliseconds(100);
  });
  const auto waited_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
          .count();
  release = true;
  holder.join();
  ASSERT_FALSE(waited.ok());
  EXPECT_NE(waited.status().message().find("stopped after 0 of 1"), std::string::npos)
      << waited.status().message();
  EXPECT_LT(waited_ms, 1000);
}

}  // namespace
}  // namespace tandem::server
