// Layer marker for the spec layer: its name, for build wiring and diagnostics.
#pragma once

namespace tandem::spec {

const char* layer_name();

}  // namespace tandem::spec
