// Layer marker for the sampling layer: its name, for build wiring and diagnostics.
#pragma once

namespace tandem::sampling {

const char* layer_name();

}  // namespace tandem::sampling
