// Layer marker for the tokenizer layer: its name, for build wiring and diagnostics.
#pragma once

namespace tandem::tokenizer {

const char* layer_name();

}  // namespace tandem::tokenizer
