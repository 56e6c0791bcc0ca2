#pragma once
// JPEG and PNG files decoded to 8-bit RGB, the input of every image transform. Only
// image_decode.cpp sees libjpeg-turbo and libpng; either may be missing from a build (CMake finds
// them), and then files of that format are refused with a message naming the library.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mixprec::data::detail {

/// An image as 8-bit RGB, row-major: pixel (y, x) is rgb[3 * (y * width + x) + c], c = R, G, B.
struct RgbImage {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> rgb;
};

enum class ImageFormat { jpeg, png };

/// The name of a format, "JPEG" or "PNG".
const char* name(ImageFormat format);
/// Whether this build decodes the format (libjpeg-turbo or libpng was found at build time).
bool format_available(ImageFormat format);
/// What a build lacking the format needs: "JPEG support is not built in: ...", naming the
/// library, its Debian package and the rebuild.
std::string missing_format_message(ImageFormat format);

/// The most pixels an image may have (width x height). Larger ones are refused before any pixel
/// buffer is allocated: a hostile header must not make a loader allocate gigabytes.
constexpr std::int64_t kMaxImagePixels = std::int64_t{1} << 26;

/// Decodes a JPEG or PNG held in memory (the format from its signature, not a file name).
/// Grayscale, palette, gray+alpha, RGBA, 16-bit and CMYK/YCCK (Adobe, inverted) inputs become
/// 8-bit RGB; alpha is dropped, not composited (as PIL's convert("RGB"), torchvision's loader).
/// 16-bit PNG samples without a gAMA or sRGB chunk are taken as sRGB, as most writers mean them.
/// ValueError naming `name` (the file, in messages) for data that is neither format, a corrupt
/// or truncated stream (the library's own message), more than kMaxImagePixels pixels, or a
/// format this build does not decode. Thread-safe: each call has its own decoder state.
RgbImage decode_image(const std::uint8_t* data, std::size_t size, const std::string& name);

/// Reads `path` whole and decodes it (decode_image); ValueError naming the file if it cannot be
/// opened or read.
RgbImage decode_image_file(const std::string& path);

}  // namespace mixprec::data::detail
