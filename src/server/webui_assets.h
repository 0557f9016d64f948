// The table that cmake/embed_webui.cmake generates (build/.../webui_assets.cpp).
// Private to the server library: everything else goes through server/webui.h.
#pragma once

#include <cstddef>

#include "server/webui.h"

namespace tandem::server {

extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

}  // namespace tandem::server
