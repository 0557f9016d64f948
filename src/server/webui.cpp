#include "server/webui.h"

#include <vector>

#include "webui_assets.h"

namespace tandem::server {
namespace {

// The page loads its scripts and styles from this server only and talks to
// this server only; a page that tried anything else would fail in the browser.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string_view trim_view(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 §13.1.2: If-None-Match compares weakly, so W/"x" matches "x".
bool etag_listed(std::string_view list, std::string_view etag) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view one = trim_view(list.substr(0, comma));
    if (one == "*") return true;
    if (one.starts_with("W/")) one.remove_prefix(2);
    if (one == etag) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::span<const WebAsset> webui_assets() {
  static const std::vector<WebAsset> assets = [] {
    std::vector<WebAsset> out;
    for (size_t i = 0; i < kEmbeddedFileCount; ++i) {
      const EmbeddedFile& f = kEmbeddedFiles[i];
      out.push_back({f.path, f.content_type, {reinterpret_cast<const char*>(f.data), f.size}, f.etag});
    }
    return out;
  }();
  return assets;
}

const WebAsset* find_webui_asset(std::string_view path) {
  for (const WebAsset& a : webui_assets())
    if (a.path == path) return &a;
  return nullptr;
}

WebReply webui_reply(const WebAsset& asset, const std::optional<std::string>& if_none_match) {
  WebReply r;
  r.content_type = asset.content_type;
  r.headers = {{"ETag", std::string(asset.etag)},
               {"Cache-Control", "no-cache"},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"}};
  if (asset.content_type.starts_with("text/html"))
    r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  if (if_none_match && etag_listed(*if_none_match, asset.etag)) {
    r.status = 304;
    return r;
  }
  r.body = asset.body;
  return r;
}

}  // namespace tandem::server
