// Drafter: proposes the next tokens of one sequence for a speculative round.
//
// Two kinds (docs/spec-speculative.md §1): `draft`, an independent small model
// with the same tokenizer and its own KV cache, and `mtp`, an MTP head that
// reads the target's final hidden states (docs/formats.md). Drafters sample
// with the same seeded sampler as the target (same seed, same absolute
// positions), which keeps acceptance high at any temperature.
//
// A drafter follows one sequence at a time (the B=1 slot); reset() forgets
// it. Not thread-safe: engine thread only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/ops.h"
#include "sampling/params.h"

namespace tandem::speculative {

enum class DraftKind { draft, mtp };
const char* draft_kind_name(DraftKind kind);
// "draft" / "mtp"; anything else is an error listing the accepted values.
Expected<DraftKind> parse_draft_kind(const std::string& text);
// From DIR/config.json: model_type "tandem_mtp" (or architectures naming an
// MTP head), or num_nextn_predict_layers > 0 (MTP layers inside a full
// checkpoint) → mtp; a supported causal-LM model_type → draft.
Expected<DraftKind> detect_draft_kind(const std::string& dir);
// The same from an already parsed config.json (`path` names it in errors).
Expected<DraftKind> detect_draft_kind(const nlohmann::json& config, const std::string& path);

struct DraftRequest {
  std::span<const int32_t> prompt;
  // Generated so far; the last token is the pending bonus at absolute
  // position prompt.size() + generated.size() - 1.
  std::span<const int32_t> generated;
  int32_t count = 0;  // drafts wanted, for the positions after the bonus
  const sampling::SamplingParams* params = nullptr;
  // MTP only: the target's final hidden states (after the final norm) for
  // every position before the bonus, row p at target_hidden[p * hidden_size].
  std::span<const float> target_hidden;
  int64_t hidden_size = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual DraftKind kind() const = 0;
  // Up to request.count tokens: exactly count, unless a position allows no
  // token (the sampler's kNoToken), where the drafts stop (maybe at none).
  virtual Expected<std::vector<int32_t>> propose(const DraftRequest& request) = 0;
  // Forget the current sequence and free its cache.
  virtual void reset() = 0;
  // Absolute positions its cache holds for one sequence: a request whose
  // bonus and drafts all sit below this bound (prompt.size() +
  // generated.size() + count - 1 < position_limit()) fits. speculative_round
  // shrinks its block to stay below it.
  virtual int64_t position_limit() const = 0;
  // A short description for logs and stats ("draft:/path", "mtp:/path").
  virtual std::string describe() const = 0;
  // The matmul mode its forwards run with (default invariant); the owner
  // applies the mode the exactness gate settled on. A drafter without
  // forwards of its own ignores it.
  virtual void set_gemm_mode(kernels::GemmMode /*mode*/) {}
};

}  // namespace tandem::speculative
