#include "serve_grammar.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "core/mapped_file.h"
#include "grammar/json_schema.h"

namespace tandem::app {
namespace {

// One of the four flags: its name in messages, its value, and how to read it.
struct GrammarFlag {
  const char* name;
  const std::string* value;
  const CLI::Option* option;
  bool from_file;
  bool is_schema;
};

}  // namespace

Expected<grammar::Grammar> compile_grammar_flag(const char* name, const std::string& value, bool from_file,
                                                bool is_schema, std::string* gbnf) {
  const std::string what = std::string(name) + " " + (from_file ? value : "");
  std::string text = value;
  if (from_file) {
    auto read = read_text_file(value);
    if (!read.ok()) return invalid_argument(what + ": cannot read the file: " + read.status().message());
    text = std::move(*read);
  }
  const std::string prefix = from_file ? what : std::string(name);
  if (is_schema) {
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return invalid_argument(prefix + ": not valid JSON: " + e.what());
    }
    if (!schema.is_object() && !schema.is_boolean())
      return invalid_argument(prefix + ": must be a JSON Schema object");
    auto gbnf = grammar::json_schema_to_gbnf(schema);
    if (!gbnf.ok()) return invalid_argument(prefix + ": " + gbnf.status().message());
    text = std::move(*gbnf);
  }
  if (!is_schema && text.find_first_not_of(" \t\r\n") == std::string::npos)
    return invalid_argument(prefix + ": the grammar is empty");
  auto parsed = grammar::parse_gbnf(text);
  if (!parsed.ok()) return invalid_argument(prefix + ": " + parsed.status().message());
  if (gbnf) *gbnf = std::move(text);
  return parsed;
}

void add_serve_grammar_options(CLI::App* sub, ServeGrammarFlags& f) {
  const char* group = "Structured outputs (docs/grammar.md)";
  f.grammar_option = sub->add_option("--grammar", f.grammar,
                                     "GBNF grammar of every request that brings no grammar, json_schema, "
                                     "response_format or tools of its own")
                         ->group(group);
  f.grammar_file_option =
      sub->add_option("--grammar-file", f.grammar_file, "File with the GBNF grammar of --grammar")
          ->group(group);
  f.json_schema_option = sub->add_option("-j,--json-schema", f.json_schema,
                                         "JSON Schema every request that brings no constraint of its own "
                                         "follows (as --grammar)")
                             ->group(group);
  f.json_schema_file_option = sub->add_option("--json-schema-file", f.json_schema_file,
                                              "-jf: file with the JSON Schema of --json-schema")
                                  ->group(group);
}

Status resolve_serve_grammar(ServeGrammarFlags& f) {
  const GrammarFlag flags[] = {
      {"--grammar", &f.grammar, f.grammar_option, false, false},
      {"--grammar-file", &f.grammar_file, f.grammar_file_option, true, false},
      {"-j/--json-schema", &f.json_schema, f.json_schema_option, false, true},
      {"-jf/--json-schema-file", &f.json_schema_file, f.json_schema_file_option, true, true},
  };
  const GrammarFlag* chosen = nullptr;
  for (const GrammarFlag& flag : flags) {
    if (!flag.option || flag.option->count() == 0) continue;
    if (chosen)
      return invalid_argument(std::string(chosen->name) + " and " + flag.name +
                              ": give one of them (each sets the server's default grammar)");
    chosen = &flag;
  }
  if (!chosen) return Status::Ok();
  auto compiled =
      compile_grammar_flag(chosen->name, *chosen->value, chosen->from_file, chosen->is_schema, &f.gbnf);
  if (!compiled.ok()) return compiled.status();
  f.compiled = std::make_shared<const grammar::Grammar>(std::move(*compiled));
  f.description = std::string(chosen->name) + (chosen->from_file ? " " + *chosen->value : "");
  return Status::Ok();
}

}  // namespace tandem::app
