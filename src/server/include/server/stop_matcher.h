// StopMatcher: applies OpenAI `stop` strings to a stream of text deltas.
//
// Text is released only when it can no longer be the start of a stop
// string, so a stop sequence split across tokens is still caught and never
// emitted. Once a stop string is seen, everything from it on is dropped and
// stopped() becomes true. One per choice; not thread-safe.
#pragma once

#include <string>
#include <vector>

namespace tandem::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds a delta; returns the text that is now safe to emit.
  std::string push(const std::string& delta);
  // End of stream: returns whatever is held (no stop can complete any more).
  std::string flush();
  bool stopped() const { return stopped_; }
  // The stop string that matched (empty until stopped()).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace tandem::server
