// GenerationRun counts each choice once in ServerMetrics, by the finish_reason
// its client is told — a stop string is "stop" although the engine sees the
// request cancelled — and server_metrics_text renders the counts and state.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "server/metrics_text.h"

namespace tandem::server {
namespace {

using scheduler::FinishReason;
using scheduler::RequestUpdate;

class FinishMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* root = std::getenv("TANDEM_SOURCE_DIR");
    ASSERT_NE(root, nullptr) << "TANDEM_SOURCE_DIR is set by CTest";
    auto t = tok::Tokenizer::from_file(std::string(root) + "/models/tandem-target/tokenizer.json");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    tokenizer_.emplace(std::move(*t));
  }

  // A one-choice non-streaming completions run whose engine request is fed by hand.
  std::unique_ptr<GenerationRun> make_run(std::vector<std::string> stops,
                                          std::shared_ptr<scheduler::EngineRequest>& request) {
    GenerationRequest req;
    req.stop = stops;
    request = std::make_shared<scheduler::EngineRequest>();
    GenerationRun::Choice c{request, std::nullopt, StopMatcher(std::move(stops)), {}, {}, {}, {}, {}, false};
    c.detok.emplace(*tokenizer_, true);
    std::vector<GenerationRun::Choice> choices;
    choices.push_back(std::move(c));
    return std::make_unique<GenerationRun>(std::move(req), "cmpl-1", "m", 1, &*tokenizer_, std::move(choices),
                                           &metrics_);
  }

  RequestUpdate tokens_of(const std::string& text) {
    RequestUpdate u;
    for (int32_t id : tokenizer_->encode(text, false)) u.tokens.push_back({id, 0.0f, {}});
    return u;
  }

  std::vector<uint64_t> counts() const {
    return {metrics_.finished_stop.load(), metrics_.finished_length.load(), metrics_.finished_abort.load()};
  }

  std::optional<tok::Tokenizer> tokenizer_;
  ServerMetrics metrics_;
};

TEST_F(FinishMetrics, AStopStringCountsAsStopAndCancelsTheEngineRequest) {
  std::shared_ptr<scheduler::EngineRequest> request;
  auto run = make_run({" whale"}, request);
  request->channel->push(tokens_of("The sea and the whale and the ship"));
  const auto [status, body] = run->collect();
  ASSERT_EQ(status, 200);
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["text"], "The sea and the");
  EXPECT_TRUE(request->channel->cancelled()) << "the engine is told to free the request";
  // The engine then finishes it as cancelled; that changes nothing for the client or the count.
  RequestUpdate last;
  last.finish = FinishReason::cancelled;
  request->channel->push(std::move(last));
  run.reset();
  EXPECT_EQ(counts(), (std::vector<uint64_t>{1, 0, 0}));
}

TEST_F(FinishMetrics, TheEnginesFinishReasonIsCountedOnce) {
  std::shared_ptr<scheduler::EngineRequest> request;
  auto run = make_run({}, request);
  RequestUpdate u = tokens_of("The sea");
  u.finish = FinishReason::length;
  request->channel->push(std::move(u));
  const auto [status, body] = run->collect();
  ASSERT_EQ(status, 200);
  EXPECT_EQ(nlohmann::json::parse(body)["choices"][0]["finish_reason"], "length");
  run->cancel();  // already finished: neither cancelled again nor counted again
  run.reset();
  EXPECT_EQ(counts(), (std::vector<uint64_t>{0, 1, 0}));
}

TEST_F(FinishMetrics, AClientThatGoesAwayCountsAsAbortOnce) {
  std::shared_ptr<scheduler::EngineRequest> request;
  auto run = make_run({}, request);
  request->channel->push(tokens_of("The sea"));
  const auto [status, body] = run->collect([] { return false; });
  EXPECT_EQ(status, 499);
  EXPECT_TRUE(request->channel->cancelled());
  run.reset();  // the destructor cancels too: not a second count
  EXPECT_EQ(counts(), (std::vector<uint64_t>{0, 0, 1}));
}

TEST(ServerMetricsText, StateAndFinishReasons) {
  ServerMetrics m;
  m.finished_stop = 3;
  m.finished_length = 2;
  m.finished_abort = 1;
  EXPECT_EQ(
      server_metrics_text(m, "loading", "org/a\"b"),
      "# HELP tandem:server_state Server state (1 for the current one): loading the model, ready, shutting "
      "down.\n"
      "# TYPE tandem:server_state gauge\n"
      "tandem:server_state{model_name=\"org/a\\\"b\",state=\"loading\"} 1\n"
      "tandem:server_state{model_name=\"org/a\\\"b\",state=\"ready\"} 0\n"
      "tandem:server_state{model_name=\"org/a\\\"b\",state=\"shutting_down\"} 0\n"
      "# HELP tandem:request_success_total Finished choices by the finish_reason their clients were told.\n"
      "# TYPE tandem:request_success_total counter\n"
      "tandem:request_success_total{model_name=\"org/a\\\"b\",finished_reason=\"stop\"} 3\n"
      "tandem:request_success_total{model_name=\"org/a\\\"b\",finished_reason=\"length\"} 2\n"
      "tandem:request_success_total{model_name=\"org/a\\\"b\",finished_reason=\"abort\"} 1\n");
}

}  // namespace
}  // namespace tandem::server
