// SHA-256 (FIPS 180-4) of a byte string, as lowercase hex. Used to name
// persisted files after their keys; not a security boundary. Pure function.
#pragma once

#include <string>
#include <string_view>

namespace tandem {

std::string sha256_hex(std::string_view data);

}  // namespace tandem
