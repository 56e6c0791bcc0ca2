#pragma once
// JPEG and PNG files written with libjpeg-turbo and libpng themselves, for the image-folder
// tests (tests/data/test_image_folder.cpp) and the CLI test's folder generator
// (tests/cli/make_image_folder.cpp). PNGs go through libpng's classic API so that the file holds
// exactly the color type and bit depth asked for, with no gAMA chunk. Each writer is compiled
// only where its library was found (MIXPREC_TESTS_JPEG / MIXPREC_TESTS_PNG).
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#if MIXPREC_TESTS_JPEG
#include <jpeglib.h>
#endif
#if MIXPREC_TESTS_PNG
#include <png.h>
#endif

namespace mixprec::testing {

/// A smooth 8-bit RGB test image: R = 6x, G = 8y, B = 128 + x - y (clamped), for w <= 42, h <= 31.
inline std::vector<std::uint8_t> gradient_rgb(int w, int h) {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(3 * w * h));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      std::uint8_t* p = &px[static_cast<std::size_t>(3 * (y * w + x))];
      p[0] = static_cast<std::uint8_t>(6 * x);
      p[1] = static_cast<std::uint8_t>(8 * y);
      p[2] = static_cast<std::uint8_t>(128 + x - y);
    }
  }
  return px;
}

#if MIXPREC_TESTS_PNG
/// Writes a PNG of the given libpng color type (PNG_COLOR_TYPE_GRAY, _GRAY_ALPHA, _RGB, _RGBA,
/// _PALETTE) and bit depth; `samples` holds the rows back to back, 16-bit samples big-endian as
/// in the file; `palette` is RGB triples for _PALETTE. Throws std::runtime_error on failure.
inline void write_png(const std::string& path, int w, int h, int color_type, int bit_depth,
                      const std::vector<std::uint8_t>& samples, const std::vector<std::uint8_t>& palette = {}) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot create " + path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    throw std::runtime_error("libpng failed writing " + path);
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), bit_depth, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> colors;
  for (std::size_t i = 0; i + 2 < palette.size(); i += 3) colors.push_back({palette[i], palette[i + 1], palette[i + 2]});
  if (!colors.empty()) png_set_PLTE(png, info, colors.data(), static_cast<int>(colors.size()));
  png_write_info(png, info);
  const std::size_t row_bytes = samples.size() / static_cast<std::size_t>(h);
  for (int y = 0; y < h; ++y) {
    png_write_row(png, const_cast<png_bytep>(samples.data() + static_cast<std::size_t>(y) * row_bytes));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}
#endif

#if MIXPREC_TESTS_JPEG
/// Writes a baseline JPEG at `quality` from 8-bit samples with `components` per pixel: 1 (gray),
/// 3 (RGB) or 4 (CMYK, stored as given with an Adobe marker: Photoshop's inverted convention
/// means the caller passes 255 - ink).
inline void write_jpeg(const std::string& path, int w, int h, int components, const std::vector<std::uint8_t>& samples,
                       int quality = 95) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot create " + path);
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);  // valid input: the default error_exit never runs
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(samples.data() + static_cast<std::size_t>(cinfo.next_scanline) *
                                                             static_cast<std::size_t>(w * components));
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::fclose(f);
}
#endif

}  // namespace mixprec::testing
