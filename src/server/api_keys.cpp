#include "server/api_keys.h"

#include <fstream>

#include "core/env.h"

namespace tandem::server {
namespace {

// Compares without an early exit on the first differing byte, so response
// time does not reveal how much of a key was right.
bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

Expected<ApiKeys> ApiKeys::load(const std::string& list, const std::string& file) {
  ApiKeys keys;
  if (!list.empty()) {
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = list.find(',', start);
      const std::string key =
          trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (key.empty()) return invalid_argument("--api-key: empty key in the comma-separated list");
      keys.keys_.push_back(key);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return not_found("--api-key-file " + file + ": cannot open");
    std::string line;
    size_t before = keys.keys_.size();
    while (std::getline(in, line)) {
      line = trim(line);
      if (line.empty() || line[0] == '#') continue;
      keys.keys_.push_back(line);
    }
    if (keys.keys_.size() == before) return invalid_argument("--api-key-file " + file + ": contains no keys");
  }
  return keys;
}

bool ApiKeys::matches(const std::string& candidate) const {
  bool ok = false;
  for (const auto& k : keys_) ok |= constant_time_equal(k, candidate);
  return ok;
}

bool ApiKeys::allows(const std::optional<std::string>& authorization,
                     const std::optional<std::string>& x_api_key) const {
  if (!enabled()) return true;
  if (x_api_key && matches(trim(*x_api_key))) return true;
  if (authorization) {
    const std::string value = trim(*authorization);
    const std::string prefix = "bearer ";
    if (value.size() > prefix.size() && to_lower(value.substr(0, prefix.size())) == prefix)
      return matches(trim(value.substr(prefix.size())));
  }
  return false;
}

}  // namespace tandem::server
