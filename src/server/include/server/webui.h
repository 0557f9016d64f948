// The built-in web page (GET /, docs/webui.md): its files, embedded into the
// binary at build time by cmake/embed_webui.cmake, and the reply for one of
// them. No runtime file lookups, no I/O; immutable data, safe from any thread.
//
// Caching (ADR 0021): every reply carries a strong ETag (from the file's
// SHA-256) and `Cache-Control: no-cache`, so a browser revalidates on each
// load, gets 304 while the binary is the same and the new page at once after
// an upgrade. The page needs no API key (it holds no data); the API calls it
// makes do, and the page asks for the key when the server answers 401.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::server {

struct WebAsset {
  std::string_view path;          // URL path: "/" for index.html, "/webui/<file>" otherwise
  std::string_view content_type;  // with charset for text
  std::string_view body;
  std::string_view etag;  // quoted strong ETag, e.g. "\"0123456789abcdef\""
};

// Every embedded file, in the order CMake listed them.
std::span<const WebAsset> webui_assets();
// The file served at `path` (no query string), or nullptr.
const WebAsset* find_webui_asset(std::string_view path);

struct WebReply {
  int status = 200;  // 200, or 304 when the client's copy is current
  std::string_view content_type;
  std::string_view body;  // empty for 304
  std::vector<std::pair<std::string, std::string>> headers;
};

// The reply for `asset` given the request's If-None-Match header (a list of
// ETags, weak or strong, or "*").
WebReply webui_reply(const WebAsset& asset, const std::optional<std::string>& if_none_match);

}  // namespace tandem::server
