#include "server/request_fields.h"

#include <cmath>
#include <limits>

namespace tandem::server::fields {

using nlohmann::json;

void fail(const std::string& field, const std::string& message) {
  throw FieldError{bad_request(field, message)};
}

const char* type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

const json* find(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number(const json& body, const char* name) {
  const json* v = find(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(name, std::string("'") + name + "' must be a number, got " + type_name(*v));
  return v->get<double>();
}

float to_float(double d) {
  if (d > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
  if (d < -std::numeric_limits<float>::max()) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(d);
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = find(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() && !(v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()))
    fail(name, std::string("'") + name + "' must be an integer, got " + type_name(*v));
  const double d = v->get<double>();
  // INT64_MAX as a double rounds up to 2^63, which no int64_t holds: an integral float of 2^63
  // passed the bounds and its conversion below was undefined behaviour.
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi) || (v->is_number_float() && d >= kTwoTo63))
    fail(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " +
                   std::to_string(hi) + ", got " + v->dump());
  // nlohmann keeps a non-negative integer as unsigned; the bounds above kept it within int64.
  if (v->is_number_unsigned()) return static_cast<int64_t>(v->get<uint64_t>());
  if (v->is_number_integer()) return v->get<int64_t>();
  return static_cast<int64_t>(d);
}

std::optional<bool> boolean(const json& body, const char* name) {
  const json* v = find(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(name, std::string("'") + name + "' must be a boolean, got " + type_name(*v));
  return v->get<bool>();
}

std::optional<std::string> string(const json& body, const char* name) {
  const json* v = find(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(name, std::string("'") + name + "' must be a string, got " + type_name(*v));
  return v->get<std::string>();
}

bool nested_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

std::variant<json, ApiError> parse_json_object(const std::string& body) {
  // Before parsing: the parse itself copes, but every later copy or dump of the value recurses.
  if (nested_deeper_than(body, kMaxJsonDepth))
    return bad_request("body",
                       "The request body nests arrays and objects more than " +
                           std::to_string(kMaxJsonDepth) + " levels deep",
                       "invalid_json");
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number that overflows a double
    return bad_request("body", std::string("The request body is not valid JSON: ") + e.what(),
                       "invalid_json");
  }
  if (!parsed.is_object())
    return bad_request("body", "The request body must be a JSON object", "invalid_json");
  return parsed;
}

}  // namespace tandem::server::fields
