// The text side of a GGUF file: the tokenizer from `tokenizer.ggml.*`
// (tokenizer/gguf_vocab.h), the chat template from `tokenizer.chat_template`
// and the stop ids. Stop ids follow text_side.h's rule with the GGUF's keys in
// the places of the Hugging Face files: tokenizer.ggml.eos_token_id (already in
// ModelConfig), then tokenizer.ggml.eot_token_id / eom_token_id and the control
// tokens llama.cpp ends generation on ("<|im_end|>", "<|eot_id|>", …), then
// the template's eos_token. A file without tokenizer.ggml.model has no
// tokenizer (logged, as a directory without tokenizer.json); malformed
// tokenizer metadata is an error naming the file and key; an unusable
// template of the file's is logged and chat refused, as for tokenizer_config.json.
#pragma once

#include "core/status.h"
#include "model/config.h"
#include "model/gguf.h"
#include "runtime/text_side.h"
#include "tokenizer/gguf_vocab.h"

namespace tandem::runtime {

// The tokenizer metadata; views into `file`. None when tokenizer.ggml.model is absent.
Expected<std::optional<tok::GgufVocab>> gguf_vocab(const model::GgufFile& file);

// `chat_template` (--chat-template, --chat-template-file) wins over the
// file's tokenizer.chat_template, as in llama-server; a name is looked up as
// tokenizer.chat_template.NAME, then among the built-ins. A given template
// that cannot be found or parsed is an error naming choice.flag.
Expected<TextSide> load_gguf_text_side(const model::GgufFile& file, const model::ModelConfig& config,
                                       const ChatTemplateChoice& chat_template = {});

}  // namespace tandem::runtime
