// Environment variables. All of tandem's are named TANDEM_* and listed in
// docs/environment.md. Reading is thread-safe as long as nobody calls setenv
// concurrently (tandem only writes at start-up, before it starts threads).
//
// The check_* functions validate one variable's value the way start-up does
// (docs/environment.md: a malformed or out-of-range value is an error naming
// the variable and the value). They are pure: the caller passes the value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tandem {

// The variable's value, or nullopt when unset.
std::optional<std::string> env_string(const char* name);

// Parses a boolean the way every TANDEM_* flag does: trimmed,
// case-insensitive; 1/true/yes/on → true, 0/false/no/off → false, anything
// else → nullopt (the caller decides what an unrecognised value means).
std::optional<bool> parse_bool(const std::string& text);

// env_string + parse_bool; nullopt when unset or unrecognised.
std::optional<bool> env_bool(const char* name);

// A whole decimal integer, trimmed, with an optional sign ("42", " -7 ");
// nullopt for anything else ("", "4x", "0x10", "1e3", "4.0") or a value
// outside int64.
std::optional<int64_t> parse_int(const std::string& text);

// Whole decimal integers separated by any of `separators` ("6144:4096:11,2048:2048:4" with ":,"),
// each as parse_int reads it; nullopt for an empty field or one parse_int refuses.
std::optional<std::vector<int64_t>> parse_int_list(const std::string& text, const std::string& separators);

// True when the value is empty or only whitespace: such a variable counts
// as unset.
bool is_blank(const std::string& text);

// Ok, or InvalidArgument "NAME='value' is not a boolean ..." (parse_bool).
Status check_bool_value(const std::string& name, const std::string& value);
// Ok, or InvalidArgument naming the range when the value is not an integer in [lo, hi].
Status check_int_value(const std::string& name, const std::string& value, int64_t lo, int64_t hi);
// Ok when the trimmed, lower-cased value is one of `accepted`; otherwise
// InvalidArgument listing them.
Status check_choice_value(const std::string& name, const std::string& value,
                          const std::vector<std::string>& accepted);

std::string to_lower(std::string s);
std::string trim(const std::string& s);

}  // namespace tandem
