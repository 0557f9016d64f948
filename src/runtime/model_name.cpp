#include "runtime/model_name.h"

#include <filesystem>
#include <system_error>
#include <vector>

namespace tandem::runtime {
namespace {

// "models--org--name" → "org/name"; "models--name" → "name"; else "".
std::string hub_repo_id(const std::string& folder) {
  const std::string prefix = "models--";
  if (folder.rfind(prefix, 0) != 0 || folder.size() == prefix.size()) return "";
  std::string rest = folder.substr(prefix.size());
  // The Hub cache joins org and name with "--"; a name may itself contain "-" but not "--" first.
  const size_t sep = rest.find("--");
  if (sep == std::string::npos) return rest;
  return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
}

}  // namespace

std::string served_model_id(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  if (ec) p = dir;
  p = p.lexically_normal();
  std::vector<std::string> parts;
  for (const auto& part : p)
    if (!part.empty() && part != "/" && part != ".") parts.push_back(part.string());
  if (parts.empty()) return "";
  const size_t n = parts.size();
  // .../models--org--name/snapshots/<hash>
  if (n >= 3 && parts[n - 2] == "snapshots") {
    const std::string id = hub_repo_id(parts[n - 3]);
    if (!id.empty()) return id;
  }
  // A repository folder of the cache itself (.../models--org--name).
  if (const std::string id = hub_repo_id(parts[n - 1]); !id.empty()) return id;
  return parts[n - 1];
}

}  // namespace tandem::runtime
