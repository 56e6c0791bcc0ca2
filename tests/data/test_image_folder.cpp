// Image folders (--data images:DIR): decoding JPEG and PNG files written here by the libraries
// themselves (exact pixels for PNG, a small tolerance for JPEG at quality 95; gray, palette,
// alpha, 16-bit and CMYK inputs), class ids from sorted folder names, the layouts and their
// errors, the evaluation transform against a resize and centre crop worked out by hand, the
// training transform's determinism per (seed, epoch, index), batches that are the same bits
// with 0, 1 and 3 workers, errors from worker threads, and prompt shutdown mid-epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/expect_error.h"
#include "data/image_decode.h"
#include "data/image_transforms.h"
#include "data/image_writers.h"
#include "io/io_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/data/image_folder.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using detail::RgbImage;
using io::test::TempDir;
using testing::gradient_rgb;

using testing::expect_value_error;

std::string mkdirs(const TempDir& t, const std::string& rel) {
  fs::create_directories(t.path() / rel);
  return (t.path() / rel).string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint8_t at(const RgbImage& img, int x, int y, int c) {
  return img.rgb[static_cast<std::size_t>(3 * (y * img.width + x) + c)];
}

#if MIXPREC_TESTS_PNG
// The formats the images of most tests are written in: PNG is lossless, so pixel checks are exact.
void write_gradient_png(const std::string& path, int w = 40, int h = 30) {
  testing::write_png(path, w, h, PNG_COLOR_TYPE_RGB, 8, gradient_rgb(w, h));
}

TEST(ImageDecode, RgbPngIsExact) {
  TempDir t;
  write_gradient_png(t / "a.png");
  const RgbImage img = detail::decode_image_file(t / "a.png");
  ASSERT_EQ(img.width, 40);
  ASSERT_EQ(img.height, 30);
  EXPECT_EQ(img.rgb, gradient_rgb(40, 30));
}

TEST(ImageDecode, GrayPaletteAlphaAnd16BitPngsBecomeRgb) {
  TempDir t;
  const int w = 12, h = 9;
  std::vector<std::uint8_t> gray, gray_alpha, rgba, index, rgb16;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const auto g = static_cast<std::uint8_t>(20 * x + y);
      gray.push_back(g);
      gray_alpha.insert(gray_alpha.end(), {g, static_cast<std::uint8_t>(255 - 21 * x)});
      // Alpha from 0 up: a transparent pixel keeps its colour (dropped, not composited).
      rgba.insert(rgba.end(), {static_cast<std::uint8_t>(x), static_cast<std::uint8_t>(y), 200,
                               static_cast<std::uint8_t>(23 * x)});
      index.push_back(static_cast<std::uint8_t>((x + y) % 3));
      for (const int v : {5000 * x, 7000 * y, 65535 - 4000 * x}) {
        rgb16.insert(rgb16.end(), {static_cast<std::uint8_t>(v >> 8), static_cast<std::uint8_t>(v & 0xFF)});
      }
    }
  }
  testing::write_png(t / "gray.png", w, h, PNG_COLOR_TYPE_GRAY, 8, gray);
  testing::write_png(t / "ga.png", w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8, gray_alpha);
  testing::write_png(t / "rgba.png", w, h, PNG_COLOR_TYPE_RGBA, 8, rgba);
  const std::vector<std::uint8_t> palette = {255, 0, 0, 0, 128, 0, 10, 20, 30};
  testing::write_png(t / "pal.png", w, h, PNG_COLOR_TYPE_PALETTE, 8, index, palette);
  testing::write_png(t / "rgb16.png", w, h, PNG_COLOR_TYPE_RGB, 16, rgb16);
  const RgbImage g = detail::decode_image_file(t / "gray.png");
  const RgbImage ga = detail::decode_image_file(t / "ga.png");
  const RgbImage a = detail::decode_image_file(t / "rgba.png");
  const RgbImage p = detail::decode_image_file(t / "pal.png");
  const RgbImage s = detail::decode_image_file(t / "rgb16.png");
  for (const RgbImage* img : {&g, &ga, &a, &p, &s}) {
    ASSERT_EQ(img->width, w);
    ASSERT_EQ(img->height, h);
  }
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const auto i = static_cast<std::size_t>(y * w + x);
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(at(g, x, y, c), gray[i]) << x << "," << y;
        EXPECT_EQ(at(ga, x, y, c), gray[i]) << x << "," << y;
        EXPECT_EQ(at(a, x, y, c), rgba[4 * i + static_cast<std::size_t>(c)]) << x << "," << y;
        EXPECT_EQ(at(p, x, y, c), palette[3 * index[i] + static_cast<std::size_t>(c)]) << x << "," << y;
        // 16-bit samples without gAMA are sRGB values: v / 65535 * 255, rounded (+-1 for
        // libpng's own rounding), not a linear-to-sRGB curve (which would put 0.5 at 188).
        const int v16 = (rgb16[6 * i + 2 * static_cast<std::size_t>(c)] << 8) | rgb16[6 * i + 2 * static_cast<std::size_t>(c) + 1];
        EXPECT_NEAR(at(s, x, y, c), std::lround(v16 * 255.0 / 65535.0), 1) << x << "," << y << " c" << c;
      }
    }
  }
}

TEST(ImageDecode, TruncatedOrGarbagePngIsAValueErrorNamingTheFile) {
  TempDir t;
  write_gradient_png(t / "whole.png");
  const std::string whole = read_bytes(t / "whole.png");
  write_bytes(t / "cut.png", whole.substr(0, whole.size() / 2));
  expect_value_error([&] { (void)detail::decode_image_file(t / "cut.png"); }, {t / "cut.png", "not a readable PNG"});
  std::string flipped = whole;
  for (std::size_t i = 60; i < flipped.size(); i += 7) flipped[i] = static_cast<char>(flipped[i] ^ 0x5A);
  write_bytes(t / "flipped.png", flipped);
  expect_value_error([&] { (void)detail::decode_image_file(t / "flipped.png"); }, {t / "flipped.png", "PNG"});
}
#endif

#if MIXPREC_TESTS_JPEG
TEST(ImageDecode, JpegAtQuality95IsCloseToItsSource) {
  TempDir t;
  const std::vector<std::uint8_t> src = gradient_rgb(40, 30);
  testing::write_jpeg(t / "a.jpg", 40, 30, 3, src, 95);
  const RgbImage img = detail::decode_image_file(t / "a.jpg");
  ASSERT_EQ(img.width, 40);
  ASSERT_EQ(img.height, 30);
  double sum = 0;
  int worst = 0;
  for (std::size_t i = 0; i < src.size(); ++i) {
    const int d = std::abs(int{img.rgb[i]} - int{src[i]});
    worst = std::max(worst, d);
    sum += d;
  }
  EXPECT_LE(worst, 12);
  EXPECT_LE(sum / static_cast<double>(src.size()), 2.0);
}

TEST(ImageDecode, GrayAndCmykJpegsBecomeRgb) {
  TempDir t;
  std::vector<std::uint8_t> gray(16 * 16), cmyk;
  for (std::size_t i = 0; i < gray.size(); ++i) gray[i] = static_cast<std::uint8_t>(8 * (i % 16) + 40);
  // Flat colour, Adobe-inverted (255 = no ink): R = 200 * 220 / 255 = 172.5 -> 173,
  // G = 150 * 220 / 255 = 129.4 -> 129, B = 100 * 220 / 255 = 86.3 -> 86.
  for (int i = 0; i < 16 * 16; ++i) cmyk.insert(cmyk.end(), {200, 150, 100, 220});
  testing::write_jpeg(t / "g.jpg", 16, 16, 1, gray, 95);
  testing::write_jpeg(t / "c.jpg", 16, 16, 4, cmyk, 95);
  const RgbImage g = detail::decode_image_file(t / "g.jpg");
  const RgbImage c = detail::decode_image_file(t / "c.jpg");
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      EXPECT_EQ(at(g, x, y, 0), at(g, x, y, 1));
      EXPECT_EQ(at(g, x, y, 0), at(g, x, y, 2));
      EXPECT_NEAR(at(g, x, y, 0), gray[static_cast<std::size_t>(16 * y + x)], 6);
      EXPECT_NEAR(at(c, x, y, 0), 173, 2);
      EXPECT_NEAR(at(c, x, y, 1), 129, 2);
      EXPECT_NEAR(at(c, x, y, 2), 86, 2);
    }
  }
}

TEST(ImageDecode, TruncatedJpegIsAValueErrorNamingTheFile) {
  TempDir t;
  testing::write_jpeg(t / "whole.jpg", 40, 30, 3, gradient_rgb(40, 30), 95);
  const std::string whole = read_bytes(t / "whole.jpg");
  write_bytes(t / "cut.jpg", whole.substr(0, whole.size() * 2 / 3));
  expect_value_error([&] { (void)detail::decode_image_file(t / "cut.jpg"); },
                     {t / "cut.jpg", "not a readable JPEG", "Premature end"});
  write_bytes(t / "header.jpg", whole.substr(0, 40));  // inside the headers
  expect_value_error([&] { (void)detail::decode_image_file(t / "header.jpg"); }, {t / "header.jpg", "JPEG"});
}
#endif

TEST(ImageDecode, OtherBytesAndMissingFilesAreValueErrors) {
  TempDir t;
  write_bytes(t / "text.jpg", "not an image at all");
  expect_value_error([&] { (void)detail::decode_image_file(t / "text.jpg"); },
                     {t / "text.jpg", "neither a JPEG nor a PNG"});
  write_bytes(t / "empty.png", "");
  expect_value_error([&] { (void)detail::decode_image_file(t / "empty.png"); }, {t / "empty.png", "neither"});
  expect_value_error([&] { (void)detail::decode_image_file(t / "absent.png"); }, {t / "absent.png", "cannot open"});
}

TEST(ImageDecode, AFormatNotBuiltInNamesItsLibrary) {
  EXPECT_EQ(detail::format_available(detail::ImageFormat::jpeg), MIXPREC_TESTS_JPEG != 0);
  EXPECT_EQ(detail::format_available(detail::ImageFormat::png), MIXPREC_TESTS_PNG != 0);
  EXPECT_NE(detail::missing_format_message(detail::ImageFormat::jpeg).find("libjpeg62-turbo-dev"), std::string::npos);
  EXPECT_NE(detail::missing_format_message(detail::ImageFormat::png).find("libpng-dev"), std::string::npos);
#if !MIXPREC_TESTS_PNG
  // The PNG signature alone reaches the format check.
  const std::string sig = "\x89PNG\r\n\x1a\n";
  expect_value_error([&] { (void)detail::decode_image(reinterpret_cast<const std::uint8_t*>(sig.data()), sig.size(), "x.png"); },
                     {"x.png", "libpng"});
#endif
#if !MIXPREC_TESTS_JPEG
  TempDir t;
  mkdirs(t, "cat");
  write_bytes(t / "cat/1.jpg", "\xFF\xD8\xFF");
  expect_value_error([&] { (void)list_image_folder(t.path().string(), 0.5, 0); }, {"cat/1.jpg", "libjpeg"});
#endif
}

// --- transforms ---

RgbImage linear_image(int w, int h) {
  // R = 10x + 20y, G = 100, B = 50: a bilinear resample of a linear function is that function at
  // the source coordinate, so the expected values follow from the coordinates alone.
  RgbImage img;
  img.width = w;
  img.height = h;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) img.rgb.insert(img.rgb.end(), {static_cast<std::uint8_t>(10 * x + 20 * y), 100, 50});
  }
  return img;
}

float normalized(double v, int c) {
  return static_cast<float>((v / 255.0 - detail::kImageNetMean[c]) / detail::kImageNetStd[c]);
}

TEST(ImageTransforms, EvalIsResizeShorterSideThenCentreCrop) {
  // 12 x 8 image to 8 x 8. By hand: the shorter side becomes floor(8 * 256 / 224) = 9, the longer
  // int(9 * 12 / 8) = 13; the centre crop starts at round(1 / 2) = 0 (half to even) rows and
  // round(5 / 2) = 2 columns. Output (y, x) reads source row (y + 0.5) * 8/9 - 0.5 (clamped at 0)
  // and column (x + 2 + 0.5) * 12/13 - 0.5.
  const RgbImage img = linear_image(12, 8);
  std::vector<float> out(3 * 8 * 8);
  detail::eval_transform(img, 8, 8, out.data());
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 8; ++x) {
      const double sy = std::max(0.0, (y + 0.5) * 8.0 / 9.0 - 0.5), sx = (x + 2.5) * 12.0 / 13.0 - 0.5;
      EXPECT_NEAR(out[static_cast<std::size_t>(y * 8 + x)], normalized(10 * sx + 20 * sy, 0), 1e-5) << y << "," << x;
      EXPECT_NEAR(out[static_cast<std::size_t>(64 + y * 8 + x)], normalized(100, 1), 1e-5);
      EXPECT_NEAR(out[static_cast<std::size_t>(128 + y * 8 + x)], normalized(50, 2), 1e-5);
    }
  }
  // One value in full: (0, 0) reads column 2.5 * 12/13 - 0.5 = 1.8077, row 0: R = 18.077.
  EXPECT_NEAR(out[0], (18.0769 / 255.0 - 0.485) / 0.229, 1e-4);
}

TEST(ImageTransforms, BilinearWeightsNeighboursByDistance) {
  // Two columns 0 and 200 upscaled 2 -> 4: column x reads (x + 0.5) / 2 - 0.5 = -0.25 (clamped to
  // 0), 0.25, 0.75, 1.25 (clamped neighbour): 0, 50, 150, 200.
  RgbImage img;
  img.width = 2;
  img.height = 1;
  img.rgb = {0, 0, 0, 200, 200, 200};
  detail::ResamplePlan p;
  p.box = {0, 0, 1, 2};
  p.resized_height = 1;
  p.resized_width = 4;
  std::vector<float> out(3 * 4);
  detail::resample_normalize(img, p, 1, 4, out.data());
  const double want[4] = {0, 50, 150, 200};
  for (int x = 0; x < 4; ++x) EXPECT_NEAR(out[static_cast<std::size_t>(x)], normalized(want[x], 0), 1e-5) << x;
  p.flip = true;
  detail::resample_normalize(img, p, 1, 4, out.data());
  for (int x = 0; x < 4; ++x) EXPECT_NEAR(out[static_cast<std::size_t>(x)], normalized(want[3 - x], 0), 1e-5) << x;
}

TEST(ImageTransforms, RandomResizedCropStaysInRangeAndFlipsHalfTheTime) {
  int flips = 0;
  for (std::int64_t i = 0; i < 2000; ++i) {
    const std::uint64_t stream = detail::augment_stream(7, 0, i);
    const detail::CropBox b = detail::random_resized_crop_box(300, 400, stream);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 300);
    ASSERT_LE(b.left + b.width, 400);
    const double area = static_cast<double>(b.height * b.width) / (300.0 * 400.0);
    const double ratio = static_cast<double>(b.width) / static_cast<double>(b.height);
    EXPECT_GE(area, 0.075);  // 8% before rounding the sides
    EXPECT_GE(ratio, 0.74);
    EXPECT_LE(ratio, 1.35);
    flips += detail::random_flip(stream) ? 1 : 0;
  }
  EXPECT_GT(flips, 900);
  EXPECT_LT(flips, 1100);
  // A 1 x 40 strip fits no try with ratio <= 4/3: the centred box of clamped ratio, 1 x 1.
  const detail::CropBox strip = detail::random_resized_crop_box(1, 40, detail::augment_stream(0, 0, 0));
  EXPECT_EQ(strip.height, 1);
  EXPECT_EQ(strip.width, 1);
  EXPECT_EQ(strip.left, 19);
}

TEST(ImageTransforms, TrainIsAPureFunctionOfSeedEpochAndIndex) {
  RgbImage img;
  img.width = 40;
  img.height = 30;
  img.rgb = gradient_rgb(40, 30);
  auto run = [&](std::uint64_t seed, std::int64_t epoch, std::int64_t index) {
    std::vector<float> out(3 * 16 * 16);
    detail::train_transform(img, 16, 16, seed, epoch, index, out.data());
    return out;
  };
  EXPECT_EQ(run(3, 1, 5), run(3, 1, 5));
  EXPECT_NE(run(3, 1, 5), run(3, 2, 5));
  EXPECT_NE(run(3, 1, 5), run(3, 1, 6));
  EXPECT_NE(run(3, 1, 5), run(4, 1, 5));
}

// --- listing ---

#if MIXPREC_TESTS_PNG
TEST(ImageFolderList, ClassIdsFollowSortedFolderNames) {
  TempDir t;
  // Byte order, as Python's sorted(): "Bee" < "ant" < "zebra".
  for (const char* c : {"zebra", "ant", "Bee"}) mkdirs(t, c);
  write_gradient_png(t / "zebra/1.png");
  write_gradient_png(t / "zebra/2.PNG");
  write_gradient_png(t / "ant/x.png");
  mkdirs(t, "ant/nested");
  write_gradient_png(t / "ant/nested/y.png");
  write_gradient_png(t / "Bee/b.png");
  write_bytes(t / "Bee/notes.txt", "ignored");
  const ImageFolder f = list_image_folder(t.path().string(), 0.4, 1);
  EXPECT_EQ(f.classes, (std::vector<std::string>{"Bee", "ant", "zebra"}));
  EXPECT_FALSE(f.split_on_disk);
  std::vector<ImageFile> all = f.train;
  all.insert(all.end(), f.val.begin(), f.val.end());
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(f.val.size(), 2u);  // round(0.4 * 5)
  for (const ImageFile& file : all) {
    const std::string cls = fs::relative(file.path, t.path()).begin()->string();
    const auto id = std::find(f.classes.begin(), f.classes.end(), cls) - f.classes.begin();
    EXPECT_EQ(file.label, id) << file.path;
  }
  // The split is a function of the seed.
  const ImageFolder again = list_image_folder(t.path().string(), 0.4, 1);
  ASSERT_EQ(again.val.size(), f.val.size());
  for (std::size_t i = 0; i < f.val.size(); ++i) EXPECT_EQ(again.val[i].path, f.val[i].path);
}

TEST(ImageFolderList, TrainAndValFoldersShareTrainsClassIds) {
  TempDir t;
  for (const char* d : {"train/a", "train/b", "train/c", "val/c", "val/a"}) mkdirs(t, d);
  write_gradient_png(t / "train/a/1.png");
  write_gradient_png(t / "train/b/1.png");
  write_gradient_png(t / "train/c/1.png");
  write_gradient_png(t / "val/a/1.png");
  write_gradient_png(t / "val/c/1.png");
  const ImageFolder f = list_image_folder(t.path().string(), 0.1, 0);
  EXPECT_TRUE(f.split_on_disk);
  EXPECT_EQ(f.classes, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(f.train.size(), 3u);
  ASSERT_EQ(f.val.size(), 2u);
  EXPECT_EQ(f.val[0].label, 0);
  EXPECT_EQ(f.val[1].label, 2);  // c is class 2 of train/, though the second of val/
  mkdirs(t, "val/d");
  write_gradient_png(t / "val/d/1.png");
  expect_value_error([&] { (void)list_image_folder(t.path().string(), 0.1, 0); }, {"val/d", "train"});
}
#endif

TEST(ImageFolderList, LayoutMistakesAreValueErrors) {
  TempDir t;
  expect_value_error([&] { (void)list_image_folder(t / "absent", 0.1, 0); }, {"absent", "no such folder"});
  write_bytes(t / "file", "x");
  expect_value_error([&] { (void)list_image_folder(t / "file", 0.1, 0); }, {"file", "not a folder"});
  mkdirs(t, "flat");
  write_bytes(t / "flat/a.png", "x");
  expect_value_error([&] { (void)list_image_folder(t / "flat", 0.1, 0); }, {"flat", "no class folders"});
  mkdirs(t, "only_train/train/cat");
  expect_value_error([&] { (void)list_image_folder(t / "only_train", 0.1, 0); }, {"only_train", "no val/"});
  expect_value_error([&] { (void)list_image_folder(t / "flat", 1.0, 0); }, {"(0, 1)"});
#if MIXPREC_TESTS_PNG || MIXPREC_TESTS_JPEG
  // Listing does not decode: any bytes under a name of a format this build has will do.
  const std::string image = MIXPREC_TESTS_PNG ? "a.png" : "a.jpg";
  mkdirs(t, "empty_class/cat");
  mkdirs(t, "empty_class/dog");
  write_bytes(t / ("empty_class/cat/" + image), "x");
  write_bytes(t / "empty_class/dog/a.txt", "x");
  expect_value_error([&] { (void)list_image_folder(t / "empty_class", 0.1, 0); }, {"empty_class/dog", "holds no"});
  mkdirs(t, "one/cat");
  write_bytes(t / ("one/cat/" + image), "x");
  expect_value_error([&] { (void)list_image_folder(t / "one", 0.1, 0); }, {"one", "single image"});
#endif
}

// --- the source ---

#if MIXPREC_TESTS_PNG
// n PNGs over 3 classes, each a shifted gradient of its own size so that every sample differs.
std::vector<ImageFile> make_files(const TempDir& t, int n) {
  std::vector<ImageFile> files;
  for (int i = 0; i < n; ++i) {
    const std::string path = t / ("img" + std::to_string(i) + ".png");
    std::vector<std::uint8_t> px = gradient_rgb(30 + i % 11, 20 + i % 7);
    for (std::uint8_t& v : px) v = static_cast<std::uint8_t>(v + 3 * i);
    testing::write_png(path, 30 + i % 11, 20 + i % 7, PNG_COLOR_TYPE_RGB, 8, px);
    files.push_back({path, i % 3});
  }
  return files;
}

ImageFolderSourceOptions opts(int workers, ImageAugment augment = ImageAugment::train) {
  ImageFolderSourceOptions o;
  o.batch_size = 4;
  o.height = 16;
  o.width = 12;
  o.seed = 11;
  o.workers = workers;
  o.augment = augment;
  o.shuffle = augment == ImageAugment::train;
  return o;
}

struct Bits {
  std::vector<float> inputs;
  std::vector<std::int64_t> targets;
  std::int64_t index = 0;
  bool operator==(const Bits& o) const {
    return inputs.size() == o.inputs.size() &&
           std::memcmp(inputs.data(), o.inputs.data(), inputs.size() * sizeof(float)) == 0 && targets == o.targets &&
           index == o.index;
  }
};

std::vector<Bits> epoch_bits(ImageFolderSource& s, std::int64_t epoch, std::int64_t first = 0) {
  s.start_epoch(epoch, first);
  std::vector<Bits> out;
  for (Batch b; s.next(b);) {
    EXPECT_EQ(b.inputs.shape(), (Shape{static_cast<std::int64_t>(b.targets.size()), 3, 16, 12}));
    out.push_back({b.inputs.to_vector(), b.targets, b.index});
  }
  return out;
}

TEST(ImageFolderSource, WorkerCountDoesNotChangeTheBits) {
  TempDir t;
  const std::vector<ImageFile> files = make_files(t, 18);  // 5 batches, the last of 2
  for (const ImageAugment aug : {ImageAugment::train, ImageAugment::eval}) {
    ImageFolderSource inline_source(files, opts(0, aug));
    ImageFolderSource one(files, opts(1, aug));
    ImageFolderSource three(files, opts(3, aug));
    EXPECT_EQ(inline_source.batches_per_epoch(), 5);
    for (std::int64_t epoch : {0, 1}) {
      const std::vector<Bits> want = epoch_bits(inline_source, epoch);
      ASSERT_EQ(want.size(), 5u);
      EXPECT_EQ(want.back().targets.size(), 2u);
      EXPECT_TRUE(epoch_bits(one, epoch) == want) << "1 worker, epoch " << epoch;
      EXPECT_TRUE(epoch_bits(three, epoch) == want) << "3 workers, epoch " << epoch;
      // Resuming mid-epoch gives the tail of the same epoch.
      const std::vector<Bits> tail = epoch_bits(three, epoch, 3);
      ASSERT_EQ(tail.size(), 2u);
      EXPECT_TRUE(tail[0] == want[3] && tail[1] == want[4]);
    }
    if (aug == ImageAugment::train) {
      // Training batches differ between epochs (order and crops); each file once per epoch.
      const std::vector<Bits> e0 = epoch_bits(three, 0), e1 = epoch_bits(three, 1);
      EXPECT_FALSE(e0 == e1);
    }
  }
}

TEST(ImageFolderSource, SamplesAreTheTransformOfTheDecodedFile) {
  TempDir t;
  const std::vector<ImageFile> files = make_files(t, 5);
  ImageFolderSource s(files, opts(2, ImageAugment::eval));
  const std::vector<Bits> batches = epoch_bits(s, 0);
  ASSERT_EQ(batches.size(), 2u);
  std::vector<float> want(3 * 16 * 12);
  for (int i = 0; i < 5; ++i) {
    detail::eval_transform(detail::decode_image_file(files[static_cast<std::size_t>(i)].path), 16, 12, want.data());
    const Bits& b = batches[static_cast<std::size_t>(i / 4)];
    EXPECT_EQ(b.targets[static_cast<std::size_t>(i % 4)], i % 3);
    EXPECT_EQ(std::memcmp(b.inputs.data() + (i % 4) * 3 * 16 * 12, want.data(), want.size() * sizeof(float)), 0) << i;
  }
  // The training source: sample i of epoch e is train_transform(seed, e, i) in the shuffled row.
  ImageFolderSource train(files, opts(2));
  const std::vector<Bits> tb = epoch_bits(train, 3);
  const RgbImage img = detail::decode_image_file(files[2].path);
  detail::train_transform(img, 16, 12, 11, 3, 2, want.data());
  bool found = false;
  for (const Bits& b : tb) {
    for (std::size_t r = 0; r < b.targets.size(); ++r) {
      found = found || std::memcmp(b.inputs.data() + r * want.size(), want.data(), want.size() * sizeof(float)) == 0;
    }
  }
  EXPECT_TRUE(found) << "no row holds file 2's epoch-3 crop";
}

TEST(ImageFolderSource, ACorruptFileFailsItsBatchTheSameWayOnEveryPath) {
  TempDir t;
  std::vector<ImageFile> files = make_files(t, 10);
  write_bytes(files[6].path, read_bytes(files[6].path).substr(0, 50));  // batch 1, row 2 (no shuffle)
  std::vector<std::string> messages;
  for (const int workers : {0, 1, 3}) {
    ImageFolderSource s(files, opts(workers, ImageAugment::eval));
    s.start_epoch(0);
    Batch b;
    ASSERT_TRUE(s.next(b));
    try {
      s.next(b);
      ADD_FAILURE() << "no error with " << workers << " workers";
    } catch (const ValueError& e) {
      messages.push_back(e.what());
      EXPECT_NE(messages.back().find(files[6].path), std::string::npos) << e.what();
    }
    EXPECT_FALSE(s.next(b));  // the epoch is over
    s.start_epoch(1);         // and a new one starts cleanly, failing at the same batch
    ASSERT_TRUE(s.next(b));
    EXPECT_THROW(s.next(b), ValueError);
  }
  EXPECT_EQ(messages[0], messages[1]);
  EXPECT_EQ(messages[0], messages[2]);
}

TEST(ImageFolderSource, TinyImagesAndBadOptionsAreRefused) {
  TempDir t;
  testing::write_png(t / "tiny.png", 7, 9, PNG_COLOR_TYPE_RGB, 8, gradient_rgb(7, 9));
  ImageFolderSource s({{t / "tiny.png", 0}}, opts(1));
  s.start_epoch(0);
  Batch b;
  expect_value_error([&] { s.next(b); }, {t / "tiny.png", "7x9", "8x8"});
  const std::vector<ImageFile> files = make_files(t, 2);
  expect_value_error([&] { ImageFolderSource({}, opts(1)); }, {"no image files"});
  auto with = [&](auto change) {
    ImageFolderSourceOptions o = opts(1);
    change(o);
    return o;
  };
  expect_value_error([&] { ImageFolderSource(files, with([](auto& o) { o.workers = -2; })); }, {"workers"});
  expect_value_error([&] { ImageFolderSource(files, with([](auto& o) { o.height = 4; })); }, {"[8, 4096]"});
  expect_value_error([&] { ImageFolderSource(files, with([](auto& o) { o.prefetch_batches = 0; })); }, {"prefetch"});
  expect_value_error([&] { ImageFolderSource(files, with([](auto& o) { o.drop_last = true; o.batch_size = 3; })); },
                     {"drop_last"});
  ImageFolderSource ok(files, opts(1));
  EXPECT_THROW(ok.next(b), StateError);
  expect_value_error([&] { ok.start_epoch(0, 2); }, {"first_batch"});
}

TEST(ImageFolderSource, StopsPromptlyMidEpoch) {
  TempDir t;
  const std::vector<ImageFile> files = make_files(t, 40);
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 5; ++round) {
    ImageFolderSource s(files, opts(3));
    s.start_epoch(0);
    Batch b;
    ASSERT_TRUE(s.next(b));
    if (round % 2 == 1) s.start_epoch(1);  // cancel a running epoch, then destroy the next one
  }  // destroyed with workers decoding: the destructor must join them, not hang
  {
    ImageFolderSource idle(files, opts(3));  // never started
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);
}
#endif

}  // namespace
}  // namespace mixprec::data
