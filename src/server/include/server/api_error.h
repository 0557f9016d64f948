// ApiError: every HTTP error tandem returns, in the OpenAI shape
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with its HTTP status. This is the one place errors become responses
// (STYLE.md): handlers build an ApiError (or convert a Status) and the HTTP
// adapter writes error_body(). Plain value type.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace tandem::server {

struct ApiError {
  int http_status = 500;
  std::string type;  // "invalid_request_error", "authentication_error", ...
  std::string message;
  std::optional<std::string> param;  // the offending request field, when there is one
  std::string code;                  // machine-readable, e.g. "invalid_value", "context_length_exceeded"
};

// 400, invalid_request_error, naming `param`.
ApiError bad_request(std::string param, std::string message, std::string code = "invalid_value");
// 401, authentication_error.
ApiError unauthorized();
// 404, invalid_request_error, code model_not_found.
ApiError model_not_found(const std::string& model);
// 404 for an unknown route.
ApiError route_not_found(const std::string& method, const std::string& path);
// 413, invalid_request_error, code request_too_large.
ApiError payload_too_large(size_t bytes, size_t limit);
// 503, server_error (still loading, shutting down).
ApiError unavailable(std::string message);
// Maps a Status from a lower layer: InvalidArgument/OutOfRange -> 400,
// NotFound -> 404, ResourceExhausted -> 429... anything else -> 500.
ApiError from_status(const Status& status, std::optional<std::string> param = std::nullopt);

// A request that ended with an error after it started generating (the
// engine's final update): InvalidArgument — its own constraints left no
// allowed token at a position (sampling/dead_end.h) — is 400
// invalid_request_error, code "no_allowed_token", naming `param` (the field
// whose constraint did it; GenerationRun::error_of finds it); anything else is
// the server's failure, 500 server_error "generation failed: ...", no param.
ApiError generation_error(const Status& status, std::optional<std::string> param = std::nullopt);

// The JSON body for an error.
std::string error_body(const ApiError& error);

}  // namespace tandem::server
