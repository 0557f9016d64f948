// SlotBoard: the server's view of llama-server's "slots" for GET /slots and
// /props — one entry per sequence the engine decodes at once (-np). A
// generation run leases the lowest free slot when it starts (none free: it
// waits in the engine's queue and shows in no slot) and gives it back when it
// ends; while it runs it reports how many tokens it has decoded. Read-only
// for clients: nothing here steers the engine. Thread-safe (one mutex; every
// call is O(slots)).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sampling/params.h"

namespace tandem::server {

struct SlotTask {
  uint64_t id_task = 0;
  int64_t n_prompt_tokens = 0;
  int32_t n_predict = -1;  // the request's token limit
  sampling::SamplingParams params;
  std::vector<std::string> stop;
  bool stream = false;
};

class SlotBoard {
 public:
  SlotBoard(int32_t slots, int64_t n_ctx, bool speculative);

  class Lease {
   public:
    Lease() = default;
    Lease(SlotBoard* board, int32_t slot) : board_(board), slot_(slot) {}
    ~Lease();
    Lease(Lease&& o) noexcept : board_(o.board_), slot_(o.slot_) { o.board_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    int32_t slot() const { return board_ ? slot_ : -1; }
    void set_decoded(int64_t n) const;

   private:
    SlotBoard* board_ = nullptr;
    int32_t slot_ = -1;
  };

  // The lowest free slot for `task`, or an empty lease when all are busy.
  Lease acquire(const SlotTask& task);
  int32_t size() const { return static_cast<int32_t>(slots_.size()); }
  // GET /slots: llama-server's array of slot objects.
  nlohmann::json snapshot() const;
  // One idle slot's object (/props' default_generation_settings): params.seed is the server's
  // default seed (--seed), -1 when none (each request draws a random one).
  nlohmann::json idle_slot_json(int32_t id, const sampling::SamplingParams& defaults,
                                std::optional<uint64_t> seed) const;

 private:
  struct Slot {
    bool busy = false;
    SlotTask task;
    int64_t n_decoded = 0;
  };
  nlohmann::json slot_json(int32_t id, const Slot& s) const;

  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  int64_t n_ctx_;
  bool speculative_;
};

// llama-server's "params" object for sampling settings (also /completion's generation_settings).
nlohmann::json llama_params_json(const sampling::SamplingParams& p, int32_t n_predict,
                                 const std::vector<std::string>& stop, bool stream, int64_t seed);

}  // namespace tandem::server
