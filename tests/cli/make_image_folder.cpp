// Writes a small image folder for tests/cli/image_folder.sh, with the libraries themselves (the
// CLI tests need no Python): DIR/train/<class>/ and DIR/val/<class>/ for three classes, PNG
// (RGB, gray, RGBA) and, where libjpeg-turbo was found, JPEG files of a few sizes.
//   make_image_folder DIR          the ImageFolder layout
//   make_image_folder DIR --flat   DIR/<class>/ only (for --val-fraction)
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/image_writers.h"

namespace {

namespace fs = std::filesystem;
using mixprec::testing::gradient_rgb;

// Image k of a class: sizes and colours vary, so that no two samples are the same.
void write_image(const fs::path& dir, int cls, int k) {
  const int w = 36 + 2 * k, h = 28 + cls;
  std::vector<std::uint8_t> rgb = gradient_rgb(w, h);
  for (std::uint8_t& v : rgb) v = static_cast<std::uint8_t>(v + 40 * cls + 7 * k);
  const std::string stem = (dir / ("img" + std::to_string(k))).string();
#if MIXPREC_TESTS_JPEG
  if (k % 2 == 1) {
    mixprec::testing::write_jpeg(stem + ".jpg", w, h, 3, rgb, 90);
    return;
  }
#endif
  if (k % 3 == 2) {
    std::vector<std::uint8_t> gray;
    for (std::size_t i = 0; i < rgb.size(); i += 3) gray.push_back(rgb[i + 1]);
    mixprec::testing::write_png(stem + ".png", w, h, PNG_COLOR_TYPE_GRAY, 8, gray);
  } else if (k % 3 == 1) {
    std::vector<std::uint8_t> rgba;
    for (std::size_t i = 0; i < rgb.size(); i += 3) rgba.insert(rgba.end(), {rgb[i], rgb[i + 1], rgb[i + 2], 128});
    mixprec::testing::write_png(stem + ".png", w, h, PNG_COLOR_TYPE_RGBA, 8, rgba);
  } else {
    mixprec::testing::write_png(stem + ".png", w, h, PNG_COLOR_TYPE_RGB, 8, rgb);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (argc == 3 && std::string(argv[2]) != "--flat") || argc > 3) {
    std::fprintf(stderr, "usage: make_image_folder DIR [--flat]\n");
    return 2;
  }
  const fs::path root = argv[1];
  const bool flat = argc == 3;
  const char* classes[] = {"cat", "dog", "fish"};
  try {
    for (int c = 0; c < 3; ++c) {
      const fs::path train = flat ? root / classes[c] : root / "train" / classes[c];
      fs::create_directories(train);
      for (int k = 0; k < 4; ++k) write_image(train, c, k);
      if (flat) continue;
      const fs::path val = root / "val" / classes[c];
      fs::create_directories(val);
      write_image(val, c, 4 + c);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_image_folder: %s\n", e.what());
    return 1;
  }
  return 0;
}
