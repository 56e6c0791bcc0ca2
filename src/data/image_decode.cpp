// JPEG through libjpeg-turbo, PNG through libpng's simplified API. MIXPREC_HAVE_JPEG and
// MIXPREC_HAVE_PNG are defined for this file alone when CMake found the library.
//
// libjpeg reports a fatal error by calling error_exit, which must not return. The C++ way out
// (throwing through the library's C frames) is undefined, so error_exit longjmps back to a
// setjmp in jpeg_decode_into(), a function that holds no object with a destructor, and the
// message is thrown from its caller. libpng's simplified API does the same internally and
// reports through png_image::message, so no jump crosses our code there.
#include "data/image_decode.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>

#include "mixprec/core/error.h"

#ifndef MIXPREC_HAVE_JPEG
#define MIXPREC_HAVE_JPEG 0
#endif
#ifndef MIXPREC_HAVE_PNG
#define MIXPREC_HAVE_PNG 0
#endif

#if MIXPREC_HAVE_JPEG
#include <csetjmp>
// jpeglib.h needs FILE and size_t declared before it (cstdio above).
#include <jpeglib.h>
// After jpeglib.h: the message codes (JWRN_JPEG_EOF).
#include <jerror.h>
#endif
#if MIXPREC_HAVE_PNG
#include <png.h>
#endif

namespace mixprec::data::detail {
namespace {

constexpr const char* kOp = "decode_image";
// A JPEG or PNG of kMaxImagePixels pixels compresses to far less; a larger file is not an image
// a loader should read into memory whole.
constexpr long kMaxFileBytes = long{1} << 30;

bool is_jpeg(const std::uint8_t* d, std::size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }
bool is_png(const std::uint8_t* d, std::size_t n) {
  static constexpr std::uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::memcmp(d, kSignature, 8) == 0;
}

// Unused in a build with neither library (each decoder calls it).
[[maybe_unused]] void check_pixels(std::int64_t width, std::int64_t height, const std::string& name,
                                   const char* format) {
  MIXPREC_CHECK(width >= 1 && height >= 1, ValueError, kOp,
                name << ": the " << format << " header gives an empty image (" << width << "x" << height << ")");
  MIXPREC_CHECK(width * height <= kMaxImagePixels, ValueError, kOp,
                name << ": " << width << "x" << height << " pixels is more than the " << kMaxImagePixels
                     << " an image may have; downscale it before training");
}

#if MIXPREC_HAVE_JPEG
struct JpegErrors {
  jpeg_error_mgr mgr;  // first member: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) are recoverable damage. A file cut short is one (libjpeg fills the rest
// with gray), but training on half a gray image is not what anyone wants: it is fatal here, as
// PIL refuses truncated images. Other warnings (stray bytes between markers) are ignored, and
// nothing is printed: a library must not write to stderr.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
}

// Adobe CMYK as Photoshop writes it is inverted (255 = no ink); with c, m, y, k so stored,
// R = c * k / 255 and so on (rounded), as PIL converts CMYK JPEGs. In place, left to right: a
// pixel's 3 RGB bytes never land beyond its 4 CMYK bytes.
void cmyk_row_to_rgb(std::uint8_t* row, std::int64_t width) {
  for (std::int64_t x = 0; x < width; ++x) {
    const unsigned k = row[4 * x + 3];
    for (int c = 0; c < 3; ++c) row[3 * x + c] = static_cast<std::uint8_t>((row[4 * x + c] * k + 127) / 255);
  }
}

// Returns false with e->message set on a libjpeg error, or with out's size set (and no message)
// for an image over kMaxImagePixels; throws only what the pixel buffer's allocation throws
// (after destroying the decoder). No local here may need a destructor: the longjmp skips them.
bool jpeg_decode_into(const std::uint8_t* data, std::size_t size, RgbImage* out, JpegErrors* e) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&e->mgr);
  e->mgr.error_exit = jpeg_fail;
  e->mgr.emit_message = jpeg_message;
  if (setjmp(e->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // libjpeg expands gray and YCbCr to RGB
  jpeg_calc_output_dimensions(&cinfo);
  const std::int64_t w = cinfo.output_width, h = cinfo.output_height;
  out->width = w;
  out->height = h;
  if (w * h > kMaxImagePixels) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  try {
    // CMYK: row y is decoded at RGB row y's start and converted in place, so its fourth byte
    // per pixel spills w bytes into the next row (or, for the last row, the extra w here).
    out->rgb.resize(static_cast<std::size_t>(3 * w * h + (cmyk ? w : 0)));
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  jpeg_start_decompress(&cinfo);
  while (cinfo.output_scanline < cinfo.output_height) {
    std::uint8_t* row = out->rgb.data() + 3 * w * static_cast<std::int64_t>(cinfo.output_scanline);
    JSAMPROW rows[1] = {row};
    jpeg_read_scanlines(&cinfo, rows, 1);
    if (cmyk) cmyk_row_to_rgb(row, w);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  out->rgb.resize(static_cast<std::size_t>(3 * w * h));  // shrinking: no allocation
  return true;
}

RgbImage decode_jpeg(const std::uint8_t* data, std::size_t size, const std::string& name) {
  JpegErrors e{};
  RgbImage img;
  if (jpeg_decode_into(data, size, &img, &e)) return img;
  if (e.message[0] == '\0') check_pixels(img.width, img.height, name, "JPEG");  // throws
  std::ostringstream m;
  m << name << ": not a readable JPEG (libjpeg-turbo: " << e.message
    << "); the file is corrupt or truncated: re-export it or remove it from the folder";
  ::mixprec::detail::throw_error<ValueError>(kOp, m.str());
}
#endif

#if MIXPREC_HAVE_PNG
RgbImage decode_png(const std::uint8_t* data, std::size_t size, const std::string& name) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  // png_image_free releases the decoder on every way out (it is a no-op once finish_read ran).
  auto fail = [&](const char* stage) {
    std::ostringstream m;
    m << name << ": not a readable PNG (libpng, " << stage << ": " << image.message
      << "); the file is corrupt or truncated: re-export it or remove it from the folder";
    png_image_free(&image);
    ::mixprec::detail::throw_error<ValueError>(kOp, m.str());
  };
  if (!png_image_begin_read_from_memory(&image, data, size)) fail("header");
  try {
    check_pixels(image.width, image.height, name, "PNG");
  } catch (...) {
    png_image_free(&image);
    throw;
  }
  // RGBA whatever the file holds: libpng expands gray, palette and 16-bit samples; the alpha is
  // then dropped below rather than composited (PIL's convert("RGB") drops it too). 8-bit output
  // with alpha is not premultiplied (png.h: "not scaled by the alpha channel").
  image.format = PNG_FORMAT_RGBA;
  image.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;  // else 16-bit samples count as linear light
  const std::int64_t w = image.width, h = image.height;
  std::vector<std::uint8_t> rgba;
  try {
    rgba.resize(static_cast<std::size_t>(4 * w * h));
  } catch (...) {
    png_image_free(&image);
    throw;
  }
  if (!png_image_finish_read(&image, nullptr, rgba.data(), 0, nullptr)) fail("pixels");
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<std::size_t>(3 * w * h));
  for (std::int64_t p = 0; p < w * h; ++p) {
    for (int c = 0; c < 3; ++c) img.rgb[static_cast<std::size_t>(3 * p + c)] = rgba[static_cast<std::size_t>(4 * p + c)];
  }
  return img;
}
#endif

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

const char* name(ImageFormat format) { return format == ImageFormat::jpeg ? "JPEG" : "PNG"; }

bool format_available(ImageFormat format) {
  if (format == ImageFormat::jpeg) return MIXPREC_HAVE_JPEG != 0;
  return MIXPREC_HAVE_PNG != 0;
}

std::string missing_format_message(ImageFormat format) {
  if (format == ImageFormat::jpeg) {
    return "JPEG support is not built in: libjpeg-turbo was not found when mixprec was built; "
           "install libjpeg62-turbo-dev (scripts/install-deps.sh) and rebuild, or convert the images to PNG";
  }
  return "PNG support is not built in: libpng was not found when mixprec was built; install "
         "libpng-dev (scripts/install-deps.sh) and rebuild, or convert the images to JPEG";
}

RgbImage decode_image(const std::uint8_t* data, std::size_t size, const std::string& name) {
  const bool jpeg = is_jpeg(data, size), png = is_png(data, size);
  MIXPREC_CHECK(jpeg || png, ValueError, kOp,
                name << ": neither a JPEG nor a PNG file (" << size
                     << " bytes; no JPEG or PNG signature at the start); remove it from the folder or convert it");
  const ImageFormat format = jpeg ? ImageFormat::jpeg : ImageFormat::png;
  MIXPREC_CHECK(format_available(format), ValueError, kOp, name << ": " << missing_format_message(format));
#if MIXPREC_HAVE_JPEG
  if (jpeg) return decode_jpeg(data, size, name);
#endif
#if MIXPREC_HAVE_PNG
  if (png) return decode_png(data, size, name);
#endif
  MIXPREC_ASSERT(false);  // format_available() refused every format compiled out
  return {};
}

RgbImage decode_image_file(const std::string& path) {
  const std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  MIXPREC_CHECK(f != nullptr, ValueError, kOp,
                path << ": cannot open the image (" << std::strerror(errno) << "); check that it exists and is readable");
  long size = -1;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) size = std::ftell(f.get());
  MIXPREC_CHECK(size >= 0 && std::fseek(f.get(), 0, SEEK_SET) == 0, ValueError, kOp,
                path << ": cannot read the image (not a regular file?)");
  MIXPREC_CHECK(size <= kMaxFileBytes, ValueError, kOp,
                path << ": " << size << " bytes is more than the " << kMaxFileBytes << " an image file may have");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  MIXPREC_CHECK(std::fread(bytes.data(), 1, bytes.size(), f.get()) == bytes.size(), ValueError, kOp,
                path << ": read failed after " << std::ftell(f.get()) << " of " << size << " bytes");
  return decode_image(bytes.data(), bytes.size(), path);
}

}  // namespace mixprec::data::detail
