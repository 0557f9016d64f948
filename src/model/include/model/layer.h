// Layer marker for the model layer: its name, for build wiring and diagnostics.
#pragma once

namespace tandem::model {

const char* layer_name();

}  // namespace tandem::model
