#pragma once
// SHA-256 (FIPS 180-4) of a byte string, as lower-case hex: the fingerprint of inputs in manifests.
#include <string>
#include <string_view>

namespace tokdyn {

std::string sha256_hex(std::string_view bytes);

}  // namespace tokdyn
