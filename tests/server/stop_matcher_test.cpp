#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace tandem::server {
namespace {

std::string run(std::vector<std::string> stops, std::vector<std::string> deltas, bool* stopped = nullptr) {
  StopMatcher m(std::move(stops));
  std::string out;
  for (const auto& d : deltas) out += m.push(d);
  out += m.flush();
  if (stopped) *stopped = m.stopped();
  return out;
}

TEST(StopMatcher, MatchesAcrossTokenBoundariesAndNeverEmitsTheStop) {
  bool stopped = false;
  EXPECT_EQ(run({"END"}, {"hello E", "N", "D world"}, &stopped), "hello ");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(run({"\n\n"}, {"a\n", "\nb"}), "a");
  EXPECT_EQ(run({"xyz", "b"}, {"a", "bc"}), "a");  // earliest stop wins
}

TEST(StopMatcher, ReleasesHeldTextWhenTheMatchFails) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("EN"), "");
  EXPECT_EQ(m.push("x"), "ENx");
  bool stopped = true;
  EXPECT_EQ(run({"END"}, {"E", "N"}, &stopped), "EN");  // flushed at end of stream
  EXPECT_FALSE(stopped);
  EXPECT_EQ(run({}, {"a", "b"}), "ab");
}

}  // namespace
}  // namespace tandem::server
