#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace tandem {
namespace {

TEST(Partition, CoversRangeInGranules) {
  for (int parts = 1; parts <= 5; ++parts) {
    for (int64_t n : {0, 1, 7, 16, 100, 151936}) {
      int64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        Range r = partition(n, parts, i, 16);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.begin, r.end);
        if (r.end != n) {
          EXPECT_EQ(r.end % 16, 0);
        }
        next = r.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(ThreadPool, RunsEveryThreadOnceAndJoins) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int round = 0; round < 200; ++round) {
      std::vector<int> hits(threads, 0);
      pool.run([&](int t) { hits[t] += 1; });
      for (int t = 0; t < threads; ++t) ASSERT_EQ(hits[t], 1) << "thread " << t << " round " << round;
    }
  }
}

TEST(ThreadPool, ParallelForVisitsEachIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> seen(1000);
  pool.parallel_for(1000, 8, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

}  // namespace
}  // namespace tandem
