// The text side of a model directory: tokenizer.json, the chat template of
// tokenizer_config.json and the stop token ids. The stop set is the one rule
// every front end (serve, generate, bench, the server's routes) stops on:
// config.json's eos_token_id (already parsed into ModelConfig), then
// generation_config.json's eos_token_id, then the template's eos_token as
// the tokenizer maps it — sorted, without duplicates. The chat template is
// chosen by runtime/chat_templates.h. A missing tokenizer or
// unusable template is not an error (logged; the caller decides whether it
// needs them); a malformed tokenizer.json is.
//
// generation_config.json's sampling fields are read into GenerationDefaults
// (the server applies them to requests that omit them: server/request_defaults.h). The file is optional:
// a missing file or field leaves the field unset; a field of the wrong type or
// out of range is logged as a WARN naming it and left unset.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "runtime/chat_templates.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::runtime {

// generation_config.json's sampling defaults; unset: absent or rejected.
struct GenerationDefaults {
  std::optional<float> temperature;         // >= 0
  std::optional<float> top_p;               // (0, 1]
  std::optional<int32_t> top_k;             // >= 0 (0: off)
  std::optional<float> min_p;               // [0, 1]
  std::optional<float> repetition_penalty;  // > 0
  std::optional<int64_t> max_new_tokens;    // >= 1
  std::optional<bool> do_sample;

  bool empty() const;
  // "temperature=0.6 top_p=0.95 ..." (set fields only, in the order above); "none" when empty.
  std::string describe() const;
};

struct TextSide {
  std::optional<tok::Tokenizer> tokenizer;         // absent: only token-id prompts work
  std::optional<tok::ChatTemplate> chat_template;  // absent: chat is refused
  std::vector<int32_t> stop_tokens;                // EOS / end-of-turn ids, sorted, unique
  GenerationDefaults generation;                   // generation_config.json's (the server applies them)
};

// Loads DIR's text side; `config` is DIR's already parsed config.json;
// `chat_template`: the template to serve instead of the model's
// (runtime/chat_templates.h, which also says where the model's comes from).
Expected<TextSide> load_text_side(const std::string& dir, const model::ModelConfig& config,
                                  const ChatTemplateChoice& chat_template = {});

// The stop ids of the rule above, from the parts (testable without files).
std::vector<int32_t> stop_tokens(const model::ModelConfig& config, const std::vector<int32_t>& generation_eos,
                                 const std::optional<tok::Tokenizer>& tokenizer,
                                 const std::optional<tok::ChatTemplate>& chat_template);

// generation_config.json's eos_token_id (an integer or a list); none when the
// file is absent, not JSON (logged) or has no such field.
std::vector<int32_t> generation_eos_ids(const std::string& dir);

// The sampling defaults of a parsed generation_config.json (`source` names
// it in the WARNs). Not an object: none, with a WARN.
GenerationDefaults parse_generation_defaults(const nlohmann::json& j, const std::string& source);

// DIR/generation_config.json's sampling defaults; none when the file is
// absent, or not JSON (a WARN).
GenerationDefaults generation_defaults(const std::string& dir);

}  // namespace tandem::runtime
