#pragma once
/// SHA-256 (FIPS 180-4), used to detect damaged checkpoint files.
#include <string>
#include <string_view>

namespace mixprec::io {

/// The SHA-256 digest of data as 64 lowercase hexadecimal characters.
std::string sha256_hex(std::string_view data);

}  // namespace mixprec::io
