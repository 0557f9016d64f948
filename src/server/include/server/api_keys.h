// ApiKeys: the set of accepted API keys (llama-server's --api-key K[,K2] and
// --api-key-file F, one key per line, '#' comments). Empty set = no auth.
// Comparison is constant-time in the key contents. Immutable after
// construction: safe to share between HTTP threads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tandem::server {

class ApiKeys {
 public:
  // `list` is comma-separated (may be empty); `file` is optional. Errors name
  // the file; an empty key inside the list is rejected.
  static Expected<ApiKeys> load(const std::string& list, const std::string& file);

  bool enabled() const { return !keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // Checks the request headers: "Authorization: Bearer <key>" or "X-Api-Key: <key>".
  bool allows(const std::optional<std::string>& authorization,
              const std::optional<std::string>& x_api_key) const;
  bool matches(const std::string& candidate) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace tandem::server
