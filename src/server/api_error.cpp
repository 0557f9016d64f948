#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace tandem::server {

ApiError bad_request(std::string param, std::string message, std::string code) {
  return {400, "invalid_request_error", std::move(message), std::move(param), std::move(code)};
}

ApiError unauthorized() {
  return {401, "authentication_error",
          "Invalid or missing API key. Send it as 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'.",
          std::nullopt, "invalid_api_key"};
}

ApiError model_not_found(const std::string& model) {
  return {404, "invalid_request_error", "The model '" + model + "' does not exist. GET /v1/models lists it.",
          std::string("model"), "model_not_found"};
}

ApiError route_not_found(const std::string& method, const std::string& path) {
  return {404, "invalid_request_error", "No route for " + method + " " + path, std::nullopt, "not_found"};
}

ApiError payload_too_large(size_t bytes, size_t limit) {
  return {413, "invalid_request_error",
          "Request body of " + std::to_string(bytes) + " bytes exceeds the limit of " +
              std::to_string(limit) + " bytes",
          std::nullopt, "request_too_large"};
}

ApiError unavailable(std::string message) {
  return {503, "server_error", std::move(message), std::nullopt, "unavailable"};
}

ApiError from_status(const Status& status, std::optional<std::string> param) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return {400, "invalid_request_error", status.message(), std::move(param), "invalid_value"};
    case StatusCode::kNotFound:
      return {404, "invalid_request_error", status.message(), std::move(param), "not_found"};
    case StatusCode::kResourceExhausted:
      return {429, "server_error", status.message(), std::move(param), "resource_exhausted"};
    case StatusCode::kUnimplemented:
      return {400, "invalid_request_error", status.message(), std::move(param), "unsupported"};
    default:
      return {500, "server_error", status.message(), std::move(param), "internal_error"};
  }
}

ApiError generation_error(const Status& status, std::optional<std::string> param) {
  if (status.code() == StatusCode::kInvalidArgument)
    return {400, "invalid_request_error", status.message(), std::move(param), "no_allowed_token"};
  return {500, "server_error", "generation failed: " + status.message(), std::nullopt, "internal_error"};
}

std::string error_body(const ApiError& e) {
  nlohmann::json body = {{"error",
                          {{"message", e.message},
                           {"type", e.type},
                           {"param", e.param ? nlohmann::json(*e.param) : nlohmann::json(nullptr)},
                           {"code", e.code}}}};
  // A message may quote what the client sent (a request path, a model name): bytes that are not
  // UTF-8 become U+FFFD instead of throwing out of the one function every error reply goes through.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tandem::server
