// Layer marker for the server layer: its name, for build wiring and diagnostics.
#pragma once

namespace tandem::server {

const char* layer_name();

}  // namespace tandem::server
