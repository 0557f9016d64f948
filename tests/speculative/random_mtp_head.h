// Test helper shared by the spec and scheduler tests: writes a random MTP head
// (docs/formats.md "MTP head") sized for a target model into a fresh
// directory under the test temp dir. Weights are seeded from `name`, so the
// same name gives the same head.
#pragma once

#include <string>

#include "model/config.h"

namespace tandem::speculative::testing {

// Returns the directory ($TMP/tandem_mtp_<name>); failures are test failures.
std::string write_random_mtp_head(const model::ModelConfig& target, const std::string& name);

}  // namespace tandem::speculative::testing
