// Decoders of tokenizer.json ("decoder" field): ByteLevel, Metaspace, Replace,
// ByteFallback, Fuse, Strip, Sequence. A decoder rewrites the list
// of token strings in place; the caller concatenates the result.
// In raw mode, byte-producing decoders keep bytes as they are (possibly
// incomplete UTF-8) so streaming can hold partial characters; otherwise
// invalid bytes become U+FFFD exactly as Hugging Face does.
// Immutable and thread-safe after construction.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace tandem::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode(std::vector<std::string>& tokens, bool raw) const = 0;
};

// `j` may be null (returns nullptr: tokens are concatenated as they are).
Expected<std::unique_ptr<Decoder>> make_decoder(const nlohmann::json& j, const std::string& where);

}  // namespace tandem::tok
