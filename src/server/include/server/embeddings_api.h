// POST /v1/embeddings (OpenAI's shape) and Ollama's /api/embed: input as a string, an array of
// strings, an array of token ids or an array of token-id arrays;
// encoding_format "float" (default) or "base64" (little-endian float32
// bytes, as OpenAI sends them); usage counts the input tokens. Text is
// tokenized with the tokenizer's special tokens (BOS), as llama-server does.
// At most kMaxEmbeddingInputs inputs. 501 when the server was started without --embeddings. The forward runs
// in the Service's Embedder (server/embedder.h). Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "server/service.h"

namespace tandem::server {

// The most inputs one request may hold (OpenAI's limit for an input array). Each input's vector
// is hidden_size floats before it is written out as JSON text: 40,000 one-word inputs (a 200 kB
// body) took the server to 1.6 GB, and an 8 MB body of them would have taken tens of GB.
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// What may stop a request's embeddings part way, checked while it waits for the embedder and
// between its forwards (Embedder::embed's keep_going): its client leaving (the reply would go
// nowhere: 499, the connection closes), its deadline passing (-to/--timeout: 503 "timeout") or
// the server stopping (after the shutdown drain: 503, as a generation request is cut then).
// Default: none of them; a batch of 2048 long inputs then runs to its end.
struct EmbedWatch {
  std::function<bool()> client_connected;  // empty: assumed connected
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::function<bool()> server_stopping;  // empty: never
};

HttpReply openai_embeddings(const Service& svc, const std::string& body, const EmbedWatch& watch = {});

// Ollama's POST /api/embed ({model, input: a string or strings} ->
// {model, embeddings: [[...]], total_duration, load_duration, prompt_eval_count})
// and, with `legacy`, the older POST /api/embeddings ({model, prompt} ->
// {embedding: [...]}); the same vectors, errors in Ollama's {"error": "..."}.
// Inputs longer than the context are refused, not truncated.
HttpReply ollama_embed(const Service& svc, const std::string& body, bool legacy,
                       const EmbedWatch& watch = {});

// Base64 (RFC 4648, padded) of `bytes`.
std::string base64_encode(const unsigned char* bytes, size_t size);

}  // namespace tandem::server
