#include "scheduler/request.h"

namespace tandem::scheduler {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::none:
      return "none";
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
  }
  return "none";
}

void RequestChannel::push(RequestUpdate update) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(update));
  }
  cv_.notify_one();
}

bool RequestChannel::pop_all(std::vector<RequestUpdate>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queue_.empty() && !cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return false;
  while (!queue_.empty()) {
    out.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return true;
}

}  // namespace tandem::scheduler
