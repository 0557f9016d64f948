#include "speculative/accept_walk.h"

#include "sampling/sampler.h"

namespace tandem::speculative {

AcceptResult accept_walk(std::span<const int32_t> drafts,
                         const std::function<int32_t(int32_t row)>& target_pick) {
  AcceptResult r;
  r.emitted.reserve(drafts.size() + 1);
  for (size_t j = 0; j <= drafts.size(); ++j) {
    const int32_t pick = target_pick(static_cast<int32_t>(j));
    if (pick == sampling::kNoToken) {
      r.dead_end = true;
      break;
    }
    r.emitted.push_back(pick);
    if (j == drafts.size() || pick != drafts[j]) break;
    ++r.accepted;
  }
  return r;
}

}  // namespace tandem::speculative
