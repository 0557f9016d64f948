// JSON Schema and json_object -> GBNF text (grammar.h parses it).
//
// Supported: type (one or a list), properties (generated in the schema's
// order), required, additionalProperties (false, true or a schema; absent
// means none when `properties` is given and any when it is not), items,
// minItems, maxItems, minLength, maxLength, enum, const, anyOf, oneOf (as
// anyOf), allOf with one schema, $ref to "#", "#/$defs/..." or any local
// JSON pointer (recursion works), format date / time / date-time / uuid / email / hostname / ipv4 / uri,
// minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers (both
// bounds within 2000 of each other, or one bound in [-1000, 1000]), pattern
// (a regex subset, json_pattern.cpp). Annotations (title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are
// ignored. Any other keyword fails with an InvalidArgument Status whose
// message names the keyword and where it is ("unsupported JSON Schema keyword
// 'uniqueItems' at #/properties/tags").
//
// The output language is JSON with bounded whitespace (nothing, one space, or
// a newline and up to 20 spaces/tabs between tokens; none before or after the
// root value) and bounded numbers (up to 16 integer and 16 fraction digits,
// 3 exponent digits) — docs/adr/0019-structured-outputs.md says why. Pure
// functions; thread-safe.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace tandem::grammar {

// "root ::= <the schema's value>" plus the rules it needs.
Expected<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
std::string json_object_gbnf();

// Several schemas in one grammar (the arguments of each tool). add() returns
// the name of the rule matching `schema` ($refs resolve inside `schema`).
class SchemaConverter {
 public:
  SchemaConverter();
  Expected<std::string> add(const nlohmann::ordered_json& schema, const std::string& name_hint);
  // Adds `name ::= body` verbatim.
  void add_rule(const std::string& name, const std::string& body);
  // Every rule, the built-in JSON ones included, as GBNF text.
  std::string gbnf() const;

 private:
  std::map<std::string, std::string> rules_;
  int counter_ = 0;
  friend struct SchemaVisitor;
};

// A JSON Schema `pattern` as a GBNF expression over the characters inside a
// JSON string (json_pattern.cpp has the supported regex syntax); unsupported
// constructs are an InvalidArgument naming them.
Expected<std::string> pattern_to_gbnf(const std::string& pattern);

// A GBNF literal matching exactly `bytes`.
std::string gbnf_literal(const std::string& bytes);

}  // namespace tandem::grammar
