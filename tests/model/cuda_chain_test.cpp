// Decode ahead on a CUDA device (ADR 0090), label "gpu": without a device each
// test reports "skipped: no CUDA device".
//
// One script of forward calls — prefills, decode steps whose tokens are the
// previous picks, and every way the next call can differ from the step queued
// ahead (a token that is not the pick, a sequence leaving the batch, a released
// sequence whose id comes back, a truncation, sampled rules, block boundaries)
// — runs with ForwardOptions::chain on and off; the picks, KV lengths and free
// blocks must be equal (exactly), and the chained run must have taken and
// dropped queued steps (so the path under test ran).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "model/device.h"
#include "model/forward.h"
#include "test_util.h"

namespace tandem::model {
namespace {

struct Trace {
  std::vector<int32_t> picks;
  std::vector<int64_t> lengths;  // after each call: every live sequence's KV length, then free blocks
  int64_t taken = 0, dropped = 0;
};

class Script {
 public:
  explicit Script(bool chain) : chain_(chain) {
    auto config = load_config(dir());
    EXPECT_TRUE(config.ok()) << config.status().to_string();
    auto m = Model::load(dir(), std::move(*config));
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    model_ = std::move(*m);
    const Status placed = model_->place_on({DeviceKind::cuda, 0});
    EXPECT_TRUE(placed.ok()) << placed.to_string();
    auto kv = KvCache::create(model_->config(), KvCache::options_for_tokens(2048, 16));
    EXPECT_TRUE(kv.ok());
    kv_ = std::make_unique<KvCache>(std::move(*kv));
    fw_ = std::make_unique<Forward>(*model_, *kv_, nullptr, 64);
  }
  static std::string dir() { return testing::fixture_path("../../../models/tandem-target"); }
  int64_t vocab() const { return model_->config().vocab_size; }
  KvCache& kv() { return *kv_; }

  SequenceId prefill(int salt, int64_t n) {
    const SequenceId seq = kv_->create_sequence();
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      tokens[i] = static_cast<int32_t>((i * 7919 + salt * 104729 + 3) % vocab());
    SequenceStep step{seq, tokens, 0, LogitRows::last};
    ForwardOptions options;
    options.picks_only = true;
    auto out = fw_->run({&step, 1}, options);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    next_[seq] = out.ok() ? out->picks[0] : 0;
    record();
    return seq;
  }
  // One decode step of `seqs`, each fed its last pick (or `override_token` for the first).
  void decode(const std::vector<SequenceId>& seqs, bool sampled = false, int32_t override_token = -1) {
    std::vector<SequenceStep> steps;
    std::vector<int32_t> tokens(seqs.size());
    std::vector<kernels::PickRule> rules;
    for (size_t i = 0; i < seqs.size(); ++i) {
      tokens[i] = i == 0 && override_token >= 0 ? override_token : next_[seqs[i]];
      const int64_t position = kv_->length(seqs[i]);
      steps.push_back(SequenceStep{seqs[i], {&tokens[i], 1}, position, LogitRows::last});
      if (sampled)
        rules.push_back(kernels::PickRule{0.8f, 0, 7000u + static_cast<uint64_t>(i), position + 1});
    }
    ForwardOptions options;
    options.picks_only = true;
    options.pick_rules = rules;
    options.chain = chain_;
    auto out = fw_->run(steps, options);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    for (size_t i = 0; i < seqs.size(); ++i) {
      trace_.picks.push_back(out->picks[i]);
      next_[seqs[i]] = out->picks[i];
    }
    record();
  }
  Trace finish() {
    trace_.taken = fw_->chained_taken();
    trace_.dropped = fw_->chained_dropped();
    return trace_;
  }

 private:
  void record() {
    for (auto& [seq, pick] : next_)
      if (kv_->valid(seq)) trace_.lengths.push_back(kv_->length(seq));
    trace_.lengths.push_back(kv_->free_blocks());
  }
  bool chain_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<Forward> fw_;
  std::map<SequenceId, int32_t> next_;
  Trace trace_;
};

Trace run_script(bool chain) {
  Script s(chain);
  const SequenceId a = s.prefill(1, 20), b = s.prefill(2, 13), c = s.prefill(3, 30);
  for (int i = 0; i < 12; ++i) s.decode({a, b, c});  // crosses a 16-token block boundary for each
  s.decode({a, b, c}, false, 5);                     // a token that is not the pick
  for (int i = 0; i < 4; ++i) s.decode({a, b, c});
  s.decode({a, b});  // c leaves the batch
  s.kv().release(c);
  for (int i = 0; i < 3; ++i) s.decode({a, b});
  s.kv().release(b);  // b's id comes back for d, at b's old length
  const SequenceId d = s.prefill(2, 13 + 1 + 12 + 1 + 4 + 1 + 3);
  for (int i = 0; i < 5; ++i) s.decode({a, d});
  for (int i = 0; i < 6; ++i) s.decode({a, d}, /*sampled=*/true);
  s.decode({a, d});  // greedy again: the queued step had sampled rules
  s.kv().truncate(a, s.kv().length(a) - 3);
  for (int i = 0; i < 4; ++i) s.decode({a});
  for (int i = 0; i < 20; ++i) s.decode({d});  // one row alone, across a block boundary
  return s.finish();
}

TEST(CudaChain, DecodeAheadGivesThePlainCallsResults) {
  if (!cuda_available()) GTEST_SKIP() << "skipped: no CUDA device";
  const Trace plain = run_script(false), chained = run_script(true);
  EXPECT_EQ(plain.taken, 0);
  EXPECT_EQ(plain.dropped, 0);
  EXPECT_EQ(chained.picks, plain.picks);
  EXPECT_EQ(chained.lengths, plain.lengths);
  // Most steps come from the queue; every kind of difference above dropped one.
  EXPECT_GT(chained.taken, 25) << "decode ahead never ran";
  EXPECT_GE(chained.dropped, 6);
}

}  // namespace
}  // namespace tandem::model
