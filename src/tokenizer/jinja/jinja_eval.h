// The Jinja interpreter: renders a parsed Template against global variables,
// with Jinja2 scoping (loop bodies and macros get their own scope; namespace()
// objects are the way to carry state out of a loop). Filters, tests, methods
// and global functions live in jinja_builtins.cpp. Every runtime error is a
// Status naming the template line. One render is single-threaded; a Template
// may be rendered concurrently.
#pragma once

#include <string>

#include "jinja_ast.h"
#include "jinja_value.h"

namespace tandem::tok::jinja {

// Renders `tpl` with `globals` (messages, tools, bos_token, helper functions...).
Expected<std::string> render(const Template& tpl, const Object& globals);

// Builtins (jinja_builtins.cpp). Errors carry no line; the caller adds it.
Expected<Value> apply_filter(const std::string& name, const Value& input, const Args& args);
Expected<bool> apply_test(const std::string& name, const Value& input, const Args& args);
// Methods on strings, lists and dicts (e.g. "a".startswith("b"), d.items()).
Expected<Value> call_method(const Value& self, const std::string& name, const Args& args);
// Global functions every template sees: range, namespace, dict.
Object builtin_globals();
// Attribute/item access: dict key, list/string index; undefined when missing.
Value get_item(const Value& obj, const Value& key);

}  // namespace tandem::tok::jinja
