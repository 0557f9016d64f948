// Typed reads of JSON request fields, shared by every body parser of the
// server (OpenAI, llama-server, Ollama, embeddings). A field that is absent
// or null reads as nullopt; a field of the wrong type or out of range throws
// FieldError with a 400 ApiError naming it. FieldError never leaves a
// parser: each parser's entry point catches it and returns the ApiError
// (parse_json_object / catch_field_errors do that). Pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "server/api_error.h"

namespace tandem::server::fields {

struct FieldError {
  ApiError error;
};

[[noreturn]] void fail(const std::string& field, const std::string& message);

// "a string", "an array", ... for messages.
const char* type_name(const nlohmann::json& v);

// The field, or nullptr when absent or null.
const nlohmann::json* find(const nlohmann::json& body, const char* name);

std::optional<double> number(const nlohmann::json& body, const char* name);
// An integer (an integral float such as 4.0 counts) in [lo, hi].
std::optional<int64_t> integer(const nlohmann::json& body, const char* name, int64_t lo, int64_t hi);
std::optional<bool> boolean(const nlohmann::json& body, const char* name);
std::optional<std::string> string(const nlohmann::json& body, const char* name);

// A JSON number as a float: beyond float's range it becomes +-infinity, which
// the sampling range checks reject with the field's range.
float to_float(double d);

// The deepest nesting of arrays and objects a request body may have. nlohmann::json's
// copy, dump and comparison recurse once per level, so a few megabytes of '[' would
// overflow an HTTP worker's stack; real requests (JSON Schemas, tool arguments) stay
// far below this (serde_json's default limit is the same 128).
inline constexpr int kMaxJsonDepth = 128;

// Whether `text` opens more than `limit` arrays/objects inside one another (brackets
// inside strings do not count). Linear, no allocation; `text` need not be valid JSON.
bool nested_deeper_than(std::string_view text, int limit);

// Parses a body that must be a JSON object: the object, or a 400 naming "body"
// (also for nesting deeper than kMaxJsonDepth).
std::variant<nlohmann::json, ApiError> parse_json_object(const std::string& body);

// Runs `parse` on a parsed object, turning a FieldError (or a json exception)
// into its ApiError.
template <typename T, typename F>
std::variant<T, ApiError> catch_field_errors(F&& parse) {
  try {
    return parse();
  } catch (const FieldError& e) {
    return e.error;
  } catch (const nlohmann::json::exception& e) {
    return bad_request("body", std::string("Malformed request: ") + e.what());
  }
}

}  // namespace tandem::server::fields
