#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
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

// ADR 0092: the pieces cover [0, n) once whatever the timing, for every
// thread count, granule (with a partial last one) and smallest piece.
TEST(ThreadPool, SharedSplitVisitsEachIndexOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 64, 1000, 4099}) {
      for (int64_t granule : {1, 4, 64}) {
        for (int64_t least : {0, 1, 3, 50}) {
          std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
          pool.parallel_for_shared(n, granule, least, [&](int64_t b, int64_t e, int) {
            ASSERT_LT(b, e);
            ASSERT_TRUE(b % granule == 0 && (e % granule == 0 || e == n));
            for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
          });
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(seen[i].load(), 1)
                << threads << " threads, n " << n << " granule " << granule << " i " << i;
        }
      }
    }
  }
}

// A thread that stalls hands the rest of its range to the others: thread 1
// sleeps in every piece it takes, and thread 0 ends up taking some of thread
// 1's home range from its back.
TEST(ThreadPool, SharedSplitLetsOthersTakeASlowThreadsTail) {
  ThreadPool pool(2);
  const int64_t n = 400;
  std::vector<int> owner(n, -1);
  pool.parallel_for_shared(n, 1, 1, [&](int64_t b, int64_t e, int t) {
    if (t == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int64_t i = b; i < e; ++i) owner[i] = t;
  });
  const Range home1 = partition(n, 2, 1);
  EXPECT_EQ(owner[home1.end - 1], 0) << "thread 0 should have taken thread 1's last piece";
  for (int64_t i = 0; i < n; ++i) ASSERT_NE(owner[i], -1);
}

}  // namespace
}  // namespace tandem
