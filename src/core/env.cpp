#include "core/env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace tandem {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::string to_lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::optional<bool> parse_bool(const std::string& text) {
  const std::string v = to_lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

std::optional<bool> env_bool(const char* name) {
  auto v = env_string(name);
  if (!v) return std::nullopt;
  return parse_bool(*v);
}

}  // namespace tandem
