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
Value items_of(const Value& v);

}  // namespace tandem::tok::jinja
