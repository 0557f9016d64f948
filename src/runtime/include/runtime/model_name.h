// The id a model directory is served under when no --alias is given.
//
// A Hugging Face Hub cache snapshot (`.../models--org--name/snapshots/<hash>`,
// what `huggingface-cli download` and `hf_hub_download` leave behind) is
// served as `org/name` — the id the Hub and vLLM use — rather than as its
// commit hash. Any other directory is served under its own name (trailing
// slashes and `.`/`..` resolved first). Pure string work, no file access
// beyond making a relative path absolute.
#pragma once

#include <string>

namespace tandem::runtime {

// "" when the path names no directory (e.g. "/").
std::string served_model_id(const std::string& dir);

}  // namespace tandem::runtime
