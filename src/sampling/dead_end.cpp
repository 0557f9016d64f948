#include "sampling/dead_end.h"

#include <limits>
#include <string>
#include <vector>

namespace tandem::sampling {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();
constexpr size_t kListed = 8;  // allowed tokens quoted by id in the message

constexpr const char* kWhere = "no token is allowed after ";
// The causes as the messages word them; dead_end_cause reads them back.
constexpr const char* kGrammarAllowsNone =
    "the grammar (grammar, json_schema or response_format) allows no token here";
constexpr const char* kBannedByBias = " banned by logit_bias";
constexpr const char* kBiasBansAll = "logit_bias bans every token";
constexpr const char* kOverflow =
    "the penalties and temperature leave every token at -infinity (a value too large for 32-bit floats)";

// The ids still above -infinity (NaN counts as masked, as in the sampler).
std::vector<int32_t> allowed_ids(std::span<const float> row) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] > kMasked) ids.push_back(static_cast<int32_t>(i));
  return ids;
}

std::string quote_ids(const std::vector<int32_t>& ids) {
  std::string out = ids.size() == 1 ? "token " : "tokens ";
  for (size_t i = 0; i < ids.size() && i < kListed; ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  if (ids.size() > kListed) out += ", ... (" + std::to_string(ids.size()) + " in all)";
  return out;
}

}  // namespace

Status no_allowed_token(std::span<const float> logits, const SamplingParams& params,
                        const TokenHistory& history) {
  const std::string where = kWhere + std::to_string(history.generated.size()) + " generated tokens: ";
  std::vector<float> row(logits.begin(), logits.end());
  if (allowed_ids(row).empty())
    return internal_error(where + "the model's logits are NaN or -infinity for every token");
  std::vector<int32_t> before;
  if (params.constraint) {
    params.constraint->mask(row, history.generated);
    before = allowed_ids(row);
    if (before.empty()) return invalid_argument(where + kGrammarAllowsNone);
  }
  apply_logit_bias(row, params);
  if (allowed_ids(row).empty()) {
    if (params.constraint)
      return invalid_argument(where + "the grammar's next " + quote_ids(before) +
                              (before.size() == 1 ? " is" : " are all") + kBannedByBias);
    return invalid_argument(where + kBiasBansAll);
  }
  // The rest of the chain (penalties, temperature, truncation) keeps a finite logit finite
  // except by overflow: a repetition penalty so large that logit * penalty is -infinity. (A
  // temperature too small to divide by is greedy, params.h, and divides nothing.)
  return invalid_argument(where + kOverflow);
}

DeadEndCause dead_end_cause(const Status& status) {
  if (status.code() != StatusCode::kInvalidArgument) return DeadEndCause::unknown;
  const std::string& m = status.message();
  auto says = [&m](const char* phrase) { return m.find(phrase) != std::string::npos; };
  if (!says(kWhere)) return DeadEndCause::unknown;
  if (says(kBannedByBias) || says(kBiasBansAll)) return DeadEndCause::logit_bias;
  if (says(kGrammarAllowsNone)) return DeadEndCause::grammar;
  if (says(kOverflow)) return DeadEndCause::penalties;
  return DeadEndCause::unknown;
}

}  // namespace tandem::sampling
