// Layer marker for the kernels layer: its name, for build wiring and diagnostics.
#pragma once

namespace tandem::kernels {

const char* layer_name();

}  // namespace tandem::kernels
