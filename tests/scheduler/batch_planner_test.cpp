// The planner driven tick by tick by a fake model: after each plan the fake
// "executes" it (prefill chunks complete, decoders gain tokens, requests
// finish at max_tokens) and the test checks the plan and every state against
// a table.
#include "scheduler/batch_planner.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tandem::scheduler {
namespace {

// Executes plans the way the engine does, with a fake model that always
// produces one token per decode and (accepted + 1) = `spec_emits` per round.
struct FakeEngine {
  explicit FakeEngine(BatchPlanner& p) : planner(p) {}
  BatchPlanner& planner;
  std::map<uint64_t, int64_t> generated, max_tokens;
  int spec_emits = 3;

  void submit(uint64_t id, int64_t prompt, int64_t max) {
    planner.enqueue(id, prompt, max);
    max_tokens[id] = max;
  }
  void emit(uint64_t id, int64_t n) {
    generated[id] += n;
    if (generated[id] >= max_tokens[id]) planner.finish(id);
  }
  TickPlan tick(bool spec) {
    TickPlan p = planner.plan(spec);
    for (uint64_t id : p.decode) emit(id, 1);
    if (p.speculative) emit(*p.speculative, spec_emits);
    for (const auto& c : p.prefill) {
      planner.on_prefilled(c.id, c.length);
      if (c.last) emit(c.id, 1);  // the first token comes from the last prompt row
    }
    return p;
  }
  std::string phases(std::initializer_list<uint64_t> ids) const {
    std::string s;
    for (uint64_t id : ids) {
      auto ph = planner.phase(id);
      s += ph ? phase_name(*ph) : "gone";
      s += ' ';
    }
    return s;
  }
};

TEST(BatchPlanner, ChunkedPrefillInterleavesWithBatchedDecode) {
  BatchPlanner planner({.max_running = 2, .prefill_budget = 8, .tokens_per_block = 4, .total_blocks = 100});
  FakeEngine e{planner};
  e.submit(1, 10, 3);
  e.submit(2, 4, 2);
  e.submit(3, 2, 1);

  struct Row {
    std::vector<uint64_t> admitted;
    std::vector<PrefillChunk> prefill;
    std::vector<uint64_t> decode;
    std::string phases;  // of requests 1 2 3 after the tick
  };
  const Row table[] = {
      {{1, 2}, {{1, 0, 8, false}}, {}, "prefilling prefilling queued "},
      {{}, {{1, 8, 2, true}, {2, 0, 4, true}}, {}, "decoding decoding queued "},
      {{}, {}, {1, 2}, "decoding gone queued "},         // 2 reaches max_tokens=2 and leaves
      {{3}, {{3, 0, 2, true}}, {1}, "gone gone gone "},  // 1 done (3 tokens); 3 done after its first token
  };
  for (size_t i = 0; i < std::size(table); ++i) {
    SCOPED_TRACE("tick " + std::to_string(i));
    TickPlan p = e.tick(false);
    EXPECT_EQ(p.admitted, table[i].admitted);
    EXPECT_EQ(p.prefill, table[i].prefill);
    EXPECT_EQ(p.decode, table[i].decode);
    EXPECT_EQ(e.phases({1, 2, 3}), table[i].phases);
  }
  EXPECT_EQ(planner.free_blocks(), 100);
  EXPECT_TRUE(planner.plan(false).idle());
}

TEST(BatchPlanner, AdmitHookSkipsCachedPromptTokens) {
  BatchPlanner planner({.max_running = 2, .prefill_budget = 8, .tokens_per_block = 4, .total_blocks = 100});
  // Request 1 finds 8 of its 10 prompt tokens cached; request 2 claims its whole prompt is,
  // but its last token is always prefilled (its logits give the first token).
  planner.set_admit_hook([](uint64_t id) -> int64_t { return id == 1 ? 8 : 4; });
  FakeEngine e{planner};
  e.submit(1, 10, 2);
  e.submit(2, 4, 1);
  TickPlan p = e.tick(false);
  EXPECT_EQ(p.admitted, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(p.prefill, (std::vector<PrefillChunk>{{1, 8, 2, true}, {2, 3, 1, true}}));
  EXPECT_EQ(e.phases({1, 2}), "decoding gone ");
  EXPECT_EQ(planner.reserved_blocks(), 3) << "admission still reserves the worst case";
}

TEST(BatchPlanner, SpeculatesOnlyWhenExactlyOneRequestDecodes) {
  BatchPlanner planner({.max_running = 4, .prefill_budget = 64, .tokens_per_block = 4, .total_blocks = 100});
  FakeEngine e{planner};
  e.submit(1, 4, 20);
  TickPlan p = e.tick(true);  // prefill 1
  EXPECT_FALSE(p.speculative);
  p = e.tick(true);  // 1 alone decoding -> speculative round
  ASSERT_TRUE(p.speculative);
  EXPECT_EQ(*p.speculative, 1u);
  EXPECT_TRUE(p.decode.empty());
  e.submit(2, 4, 20);
  p = e.tick(true);  // 2 prefills while 1 still speculates
  EXPECT_EQ(p.speculative, std::optional<uint64_t>(1));
  ASSERT_EQ(p.prefill.size(), 1u);
  p = e.tick(true);  // two decoding -> batched classic step, no speculation
  EXPECT_FALSE(p.speculative);
  EXPECT_EQ(p.decode, (std::vector<uint64_t>{1, 2}));
  p = e.tick(false);  // speculation unavailable (gate/policy): classic even at B=1 later
  EXPECT_FALSE(p.speculative);
}

TEST(BatchPlanner, AdmissionQueuesWhatDoesNotFitAndNeverEvicts) {
  // 10 blocks of 4 tokens; each request needs ceil((8 + 8) / 4) = 4 blocks.
  BatchPlanner planner({.max_running = 8, .prefill_budget = 100, .tokens_per_block = 4, .total_blocks = 10});
  FakeEngine e{planner};
  for (uint64_t id = 1; id <= 3; ++id) e.submit(id, 8, 8);
  TickPlan p = e.tick(false);
  EXPECT_EQ(p.admitted, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(planner.free_blocks(), 2);
  EXPECT_EQ(planner.queued(), 1);
  EXPECT_EQ(e.phases({1, 2, 3}), "decoding decoding queued ");
  // Cancelling 1 releases its blocks at the next plan, which admits 3.
  planner.cancel(1);
  p = e.tick(false);
  EXPECT_EQ(p.dropped, (std::vector<uint64_t>{1}));
  EXPECT_EQ(p.admitted, (std::vector<uint64_t>{3}));
  EXPECT_EQ(p.decode, (std::vector<uint64_t>{2}));
  EXPECT_FALSE(planner.fits_ever(40, 1));
  EXPECT_TRUE(planner.fits_ever(20, 20));
}

// Admission reserves prompt + max_tokens and nothing more: a request that
// fills the pool exactly is served (speculative rounds stay inside it).
TEST(BatchPlanner, ARequestFillingThePoolExactlyIsAdmitted) {
  BatchPlanner planner({.max_running = 1, .prefill_budget = 100, .tokens_per_block = 4, .total_blocks = 4});
  EXPECT_EQ(planner.blocks_needed(5, 11), 4);
  EXPECT_TRUE(planner.fits_ever(5, 11));
  EXPECT_FALSE(planner.fits_ever(5, 12));
  FakeEngine e{planner};
  e.submit(1, 5, 11);
  EXPECT_EQ(e.tick(true).admitted, (std::vector<uint64_t>{1}));
  EXPECT_EQ(planner.free_blocks(), 0);
}

TEST(BatchPlanner, MaxRunningCapsConcurrency) {
  BatchPlanner planner({.max_running = 1, .prefill_budget = 100, .tokens_per_block = 4, .total_blocks = 100});
  FakeEngine e{planner};
  e.submit(1, 4, 2);
  e.submit(2, 4, 2);
  EXPECT_EQ(e.tick(false).admitted, (std::vector<uint64_t>{1}));
  EXPECT_EQ(e.phases({1, 2}), "decoding queued ");
  e.tick(false);  // 1 finishes
  EXPECT_EQ(e.tick(false).admitted, (std::vector<uint64_t>{2}));
}

}  // namespace
}  // namespace tandem::scheduler
