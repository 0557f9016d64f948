// llama-server's server-wide grammar flags on `tandem serve`: --grammar GBNF,
// --grammar-file FILE, -j/--json-schema SCHEMA, -jf/--json-schema-file FILE.
// Each sets the grammar of every completion and chat request that brings no
// constraint of its own (apply_server_grammar, server/structured_request.h has
// the precedence). The grammar is read and compiled at start-up, before the
// port is bound: an unreadable file, a GBNF syntax error, JSON that is not a
// schema or a schema keyword tandem does not support is an InvalidArgument
// naming the flag and the problem (exit 2). Start-up only; not thread-safe.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/status.h"
#include "grammar/grammar.h"

namespace tandem::app {

struct ServeGrammarFlags {
  std::string grammar, grammar_file, json_schema, json_schema_file;  // as given
  CLI::Option *grammar_option = nullptr, *grammar_file_option = nullptr, *json_schema_option = nullptr,
              *json_schema_file_option = nullptr;
  // Resolved: null when none of the four was given.
  std::shared_ptr<const grammar::Grammar> compiled;
  std::string gbnf;         // its GBNF text (a JSON Schema's, converted), as GET /props reports it
  std::string description;  // "--grammar-file g.gbnf", for the start-up log
};

void add_serve_grammar_options(CLI::App* sub, ServeGrammarFlags& flags);

// The grammar one flag gives: GBNF or a JSON Schema (is_schema), inline or read from the file
// `value` names (from_file); an InvalidArgument naming the flag says what is wrong. `gbnf`
// (optional) receives the GBNF text compiled (a schema's, converted). Also `tandem generate`'s
// --grammar / --grammar-file.
Expected<grammar::Grammar> compile_grammar_flag(const char* name, const std::string& value, bool from_file,
                                                bool is_schema, std::string* gbnf = nullptr);

// Reads and compiles the one flag given into flags.compiled; two or more given is an error.
Status resolve_serve_grammar(ServeGrammarFlags& flags);

}  // namespace tandem::app
