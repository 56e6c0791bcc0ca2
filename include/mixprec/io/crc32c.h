#pragma once
/// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected), the checksum of TensorBoard's
/// TFRecord framing, and TFRecord's "masked" form of it.
#include <cstdint>
#include <string_view>

namespace mixprec::io {

/// CRC-32C of data (crc32c("123456789") == 0xE3069283).
std::uint32_t crc32c(std::string_view data);

/// TFRecord's masked CRC: rotate right by 15 bits and add 0xa282ead8, so that a CRC stored
/// inside the data it covers does not checksum to a fixed value.
std::uint32_t masked_crc32c(std::string_view data);

}  // namespace mixprec::io
