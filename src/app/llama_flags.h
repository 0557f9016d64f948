// llama-server's flags that `tandem serve` does not act on: each is either
// accepted as a no-op (logged at start-up with the reason it changes
// nothing here, e.g. `--jinja`: templates are always Jinja) or refused with
// exit 2 and a message that names it and says why (e.g. `-hf`: tandem
// downloads nothing). Some are accepted only with the values that change
// nothing (`-ngl 0`, `-fa on`, `-ctk f32`, `--cache-reuse 0`). The flags
// tandem implements with llama-server's meaning are ordinary options of
// serve (serve_options.cpp); docs/llama-server.md lists every flag's class.
//
// Each flag's llama-server variable (LLAMA_ARG_*) is read when the flag is
// not given, and judged the same way; the error then names the variable.
//
// llama-server also spells many flags with one dash and several letters
// (-ngl, -md, -ctk). CLI11 knows one-letter short options only, and would
// read `-cb` as `-c b`, so rewrite_llama_spellings() turns every such
// spelling into its long form before parsing and refuses an unknown one,
// instead of letting it be misparsed. Start-up only; not thread-safe.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace tandem::app {

// The table's flags on `serve` (one option per row), for check_llama_flags.
// Must outlive parsing: CLI11 writes into `storage`.
struct LlamaFlagValues {
  std::vector<CLI::Option*> options;
  std::vector<std::vector<std::string>> storage;
};
void add_llama_flags(CLI::App* serve, LlamaFlagValues& out);

// Judges every table flag given (or set through its variable): logs each
// no-op; the first refused one is an InvalidArgument naming it and the reason.
Status check_llama_flags(const LlamaFlagValues& flags);

// Rewrites llama-server's one-dash spellings (argv[0] excluded) to the long
// names that `app`'s subcommands know. A one-dash token of several letters
// that is neither such a spelling nor a value of the option before it is an
// error naming it (`-c4096` included: llama-server takes no attached values).
Expected<std::vector<std::string>> rewrite_llama_spellings(CLI::App& app, std::vector<std::string> args);

}  // namespace tandem::app
