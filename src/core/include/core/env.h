// Environment variables. All of tandem's are named TANDEM_* and listed in
// docs/environment.md. Reading is thread-safe as long as nobody calls setenv
// concurrently (tandem only reads).
#pragma once

#include <optional>
#include <string>

namespace tandem {

// The variable's value, or nullopt when unset.
std::optional<std::string> env_string(const char* name);

// Parses a boolean the way every TANDEM_* flag does: trimmed,
// case-insensitive; 1/true/yes/on → true, 0/false/no/off → false, anything
// else → nullopt (the caller decides what an unrecognised value means).
std::optional<bool> parse_bool(const std::string& text);

// env_string + parse_bool; nullopt when unset or unrecognised.
std::optional<bool> env_bool(const char* name);

std::string to_lower(std::string s);
std::string trim(const std::string& s);

}  // namespace tandem
