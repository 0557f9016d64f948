#include "core/env.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace tandem {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::string to_lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
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

std::optional<int64_t> parse_int(const std::string& text) {
  const std::string t = trim(text);
  const size_t digits = t.find_first_not_of("+-") == 1 ? 1 : 0;
  if (t.size() <= digits || t.find_first_not_of("0123456789", digits) != std::string::npos)
    return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno == ERANGE || end != t.c_str() + t.size()) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<std::vector<int64_t>> parse_int_list(const std::string& text, const std::string& separators) {
  std::vector<int64_t> out;
  size_t at = 0;
  for (;;) {
    const size_t end = text.find_first_of(separators, at);
    const std::optional<int64_t> v = parse_int(text.substr(at, end == std::string::npos ? end : end - at));
    if (!v) return std::nullopt;
    out.push_back(*v);
    if (end == std::string::npos) return out;
    at = end + 1;
  }
}

bool is_blank(const std::string& text) { return trim(text).empty(); }

namespace {
std::string quoted(const std::string& name, const std::string& value) { return name + "='" + value + "'"; }
}  // namespace

Status check_bool_value(const std::string& name, const std::string& value) {
  if (parse_bool(value)) return Status::Ok();
  return invalid_argument(quoted(name, value) +
                          " is not a boolean; accepted: 1, true, yes, on, 0, false, no, off");
}

Status check_int_value(const std::string& name, const std::string& value, int64_t lo, int64_t hi) {
  const auto v = parse_int(value);
  if (v && *v >= lo && *v <= hi) return Status::Ok();
  return invalid_argument(quoted(name, value) + (v ? " is out of range" : " is not an integer") +
                          "; accepted: " + std::to_string(lo) + ".." + std::to_string(hi));
}

Status check_choice_value(const std::string& name, const std::string& value,
                          const std::vector<std::string>& accepted) {
  const std::string v = to_lower(trim(value));
  if (std::find(accepted.begin(), accepted.end(), v) != accepted.end()) return Status::Ok();
  std::string list;
  for (const auto& a : accepted) list += (list.empty() ? "" : ", ") + a;
  return invalid_argument(quoted(name, value) + " is not one of: " + list);
}

}  // namespace tandem
