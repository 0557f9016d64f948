// The GPU forward's tuning and comparison variables (docs/environment.md:
// TANDEM_CUDA_* and TANDEM_STEP_TIMING). The layers that use them
// (kernels/cuda, model, scheduler) read them with getenv where they are
// used, each with its own parsing (std::atoi, == "0", strtol), so a blank or
// misspelt value used to be taken silently as some value. validate_gpu_knobs
// runs at start-up (validate_environment, single-threaded, before anything
// loads) and leaves the environment in a form every reader takes the same
// way: a blank variable is removed (the default), a valid one is rewritten to
// its canonical spelling (booleans as 0 / 1, choices trimmed and lower-case,
// integers without blanks or sign), an invalid one is an InvalidArgument
// naming the variable, its value and what is accepted.
//
// The accepted ranges mirror constants of CUDA-only files, which a build
// without CUDA does not compile (gpu_knobs.cpp says which); they live here
// once, for the app.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tandem::app {

// Checks every GPU knob that is set; removes blank ones, canonicalises the
// others (setenv: call only while single-threaded). Stops at the first
// invalid one.
Status validate_gpu_knobs();

// The canonical spelling of `value` for the GPU knob `name` (pure), or the
// InvalidArgument validate_gpu_knobs reports. `value` must not be blank.
// InvalidArgument too for a name that is not a GPU knob.
Expected<std::string> canonical_gpu_knob(const std::string& name, const std::string& value);

// The knobs' names, in docs/environment.md's order (for tests).
const std::vector<std::string>& gpu_knob_names();

}  // namespace tandem::app
