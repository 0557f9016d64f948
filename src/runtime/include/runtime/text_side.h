// The text side of a model directory: tokenizer.json, the chat template of
// tokenizer_config.json and the stop token ids. The stop set is the one rule
// every front end (serve, generate, bench, the server's routes) stops on:
// config.json's eos_token_id (already parsed into ModelConfig), then
// generation_config.json's eos_token_id, then the template's eos_token as
// the tokenizer maps it — sorted, without duplicates. A missing tokenizer or
// unusable template is not an error (logged; the caller decides whether it
// needs them); a malformed tokenizer.json is.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::runtime {

struct TextSide {
  std::optional<tok::Tokenizer> tokenizer;         // absent: only token-id prompts work
  std::optional<tok::ChatTemplate> chat_template;  // absent: chat is refused
  std::vector<int32_t> stop_tokens;                // EOS / end-of-turn ids, sorted, unique
};

// Loads DIR's text side; `config` is DIR's already parsed config.json.
Expected<TextSide> load_text_side(const std::string& dir, const model::ModelConfig& config);

// The stop ids of the rule above, from the parts (testable without files).
std::vector<int32_t> stop_tokens(const model::ModelConfig& config, const std::vector<int32_t>& generation_eos,
                                 const std::optional<tok::Tokenizer>& tokenizer,
                                 const std::optional<tok::ChatTemplate>& chat_template);

// generation_config.json's eos_token_id (an integer or a list); none when the
// file is absent, not JSON (logged) or has no such field.
std::vector<int32_t> generation_eos_ids(const std::string& dir);

}  // namespace tandem::runtime
