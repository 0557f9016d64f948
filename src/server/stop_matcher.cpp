#include "server/stop_matcher.h"

#include <algorithm>

namespace tandem::server {

std::string StopMatcher::push(const std::string& delta) {
  if (stopped_) return "";
  held_ += delta;
  size_t earliest = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = held_.find(s);
    if (at < earliest) {
      earliest = at;
      matched_ = s;
    }
  }
  if (earliest != std::string::npos) {
    std::string out = held_.substr(0, earliest);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, held_.size()); len > hold; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace tandem::server
