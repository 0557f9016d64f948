// GgufVocab: the `tokenizer.ggml.*` metadata of a GGUF file, and the
// Tokenizer it describes.
//
// tokenizer_from_gguf() builds the tokenizer.json that a Hugging Face
// checkpoint of the same vocabulary ships and loads it with
// Tokenizer::from_json, so a GGUF model encodes and decodes exactly as the
// tokenizer.json path does:
//   model "gpt2"  byte-level BPE with the stored merges; the pre-tokenizer
//                 regex by `pre`: "default"/"gpt2" (GPT-2), "llama-bpe"/
//                 "llama3" (Llama 3: digits in threes, ignore_merges),
//                 "qwen2"/"deepseek-r1-qwen" (Qwen2/3: NFC, single digits);
//                 any other `pre` is Unimplemented naming it.
//   model "llama" SentencePiece-style BPE with byte fallback (Llama 2,
//                 Mistral): "▁" for spaces plus one in front when
//                 add_space_prefix; merges are the stored ones or, as
//                 llama.cpp's files carry only scores, derived from the
//                 scores the way transformers converts a SentencePiece model
//                 (every split of a token into two vocabulary pieces, ranked
//                 by the token's score, highest first; ties in id order).
// Token types (llama.cpp's: 1 normal, 2 unknown, 3 control, 4 user-defined,
// 5 unused, 6 byte): control and unknown tokens become special added tokens,
// user-defined ones non-special added tokens; every token keeps its id.
// add_bos/add_eos become the post-processor's template. Errors are Status
// values naming `source` and the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace tandem::tok {

enum class GgufTokenType : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6
};

struct GgufVocab {
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre ("" when absent: "default")
  std::vector<std::string_view> tokens;
  std::vector<float> scores;             // empty when absent
  std::vector<int32_t> token_types;      // empty when absent (all normal)
  std::vector<std::string_view> merges;  // "left right"; empty when absent
  int32_t bos_id = -1, eos_id = -1, unknown_id = -1;
  std::optional<bool> add_bos, add_eos, add_space_prefix;  // unset: the model's default
};

// The tokenizer.json text for `vocab` (exposed for tests and tools).
Expected<std::string> tokenizer_json_from_gguf(const GgufVocab& vocab, const std::string& source);
Expected<Tokenizer> tokenizer_from_gguf(const GgufVocab& vocab, const std::string& source);

// Stop tokens llama.cpp treats as end of generation when they are control
// tokens ("<|im_end|>", "<|eot_id|>", …); their ids, in id order.
std::vector<int32_t> gguf_end_of_generation_ids(const GgufVocab& vocab);

}  // namespace tandem::tok
