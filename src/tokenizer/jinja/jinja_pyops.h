// Python-semantics helpers shared by the Jinja builtins: str methods
// (strip/split/replace/case) on UTF-8 by code point, list()/items() views.
#pragma once

#include <string>
#include <vector>

#include "jinja_value.h"

namespace tandem::tok::jinja {

bool py_space(char32_t c);
std::vector<std::string> code_points(const std::string& s);
std::string strip(const std::string& s, const Value& chars, bool left, bool right);
std::string to_upper(const std::string& s);
std::string to_lower(const std::string& s);
bool is_alpha(char c);
std::string title(const std::string& s);
Value split(const std::string& s, const Value& sep, int64_t maxsplit);
std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
Expected<Value> to_list(const Value& v);
// Python `fmt % args` (%s, %r, %d, %i, %f with optional precision, %%).
Expected<Value> percent_format(const std::string& fmt, const Value& args);
// Python `fmt.format(*args, **kwargs)` for {}, {0} and {name} fields.
Expected<Value> brace_format(const std::string& fmt, const Args& args);
Value items_of(const Value& v);

}  // namespace tandem::tok::jinja
