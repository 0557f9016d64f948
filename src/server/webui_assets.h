// The table that cmake/embed_webui.cmake generates (build/.../webui_assets.cpp).
// Plain pointers and sizes, so the table is constant-initialized (no static
// initialization order to worry about). Private to the server library:
// everything else goes through server/webui.h.
#pragma once

#include <cstddef>

namespace tandem::server {

struct EmbeddedFile {
  const char* path;
  const char* content_type;
  const unsigned char* data;
  size_t size;
  const char* etag;
};

extern const EmbeddedFile kEmbeddedFiles[];
extern const size_t kEmbeddedFileCount;

}  // namespace tandem::server
