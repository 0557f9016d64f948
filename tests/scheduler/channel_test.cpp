#include <gtest/gtest.h>

#include <thread>

#include "scheduler/request.h"

namespace tandem::scheduler {
namespace {

TEST(RequestChannel, DeliversUpdatesAcrossThreadsInOrder) {
  RequestChannel ch;
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) {
      RequestUpdate u;
      u.tokens.push_back({i, 0.0f, {}});
      if (i == 99) u.finish = FinishReason::length;
      ch.push(std::move(u));
    }
  });
  std::vector<int32_t> seen;
  bool done = false;
  while (!done) {
    std::vector<RequestUpdate> batch;
    ch.pop_all(batch, std::chrono::milliseconds(1000));
    for (auto& u : batch) {
      for (auto& t : u.tokens) seen.push_back(t.token);
      done |= u.finish != FinishReason::none;
    }
  }
  producer.join();
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
}

TEST(RequestChannel, TimesOutAndCancels) {
  RequestChannel ch;
  std::vector<RequestUpdate> out;
  EXPECT_FALSE(ch.pop_all(out, std::chrono::milliseconds(5)));
  EXPECT_FALSE(ch.cancelled());
  ch.cancel();
  EXPECT_TRUE(ch.cancelled());
}

}  // namespace
}  // namespace tandem::scheduler
