// Layer marker for the scheduler layer: its name, for build wiring and diagnostics.
#pragma once

namespace tandem::scheduler {

const char* layer_name();

}  // namespace tandem::scheduler
