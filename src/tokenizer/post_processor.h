// Post-processors of tokenizer.json ("post_processor" field), reduced to what
// single-sequence encoding needs: the ids added before and after the text.
// Supports TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel
// (no ids) and Sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tandem::tok {

struct PostProcessor {
  std::vector<int32_t> prefix;  // e.g. BOS
  std::vector<int32_t> suffix;  // e.g. EOS
};

using TokenLookup = std::function<std::optional<int32_t>(std::string_view)>;

Expected<PostProcessor> make_post_processor(const nlohmann::json& j, const std::string& where,
                                            const TokenLookup& lookup);

}  // namespace tandem::tok
