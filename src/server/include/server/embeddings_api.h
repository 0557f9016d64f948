// POST /v1/embeddings (OpenAI's shape): input as a string, an array of
// strings, an array of token ids or an array of token-id arrays;
// encoding_format "float" (default) or "base64" (little-endian float32
// bytes, as OpenAI sends them); usage counts the input tokens. Text is
// tokenized with the tokenizer's special tokens (BOS), as llama-server does.
// 501 when the server was started without --embeddings. The forward runs in
// the Service's Embedder (server/embedder.h). Thread-safe.
#pragma once

#include <string>

#include "server/service.h"

namespace tandem::server {

HttpReply openai_embeddings(const Service& svc, const std::string& body);

// Base64 (RFC 4648, padded) of `bytes`.
std::string base64_encode(const unsigned char* bytes, size_t size);

}  // namespace tandem::server
