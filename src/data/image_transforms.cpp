#include "data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/random.h"

namespace mixprec::data::detail {
namespace {

// Keeps the augmentation stream apart from the shuffling and weight streams of the same seed.
constexpr std::uint64_t kAugmentSalt = 0x4155'474D'454E'5431ull;  // "AUGMENT1"
// Word layout of a sample's stream: try t of RandomResizedCrop reads words 8t..8t+5 (two
// 53-bit uniforms, two 32-bit integers), the flip reads the word after the last try.
constexpr int kCropTries = 10;
constexpr std::uint64_t kFlipWord = 8 * kCropTries;

double uniform53(std::uint64_t stream, std::uint64_t word) {
  const std::uint64_t hi = random_bits(stream, word), lo = random_bits(stream, word + 1);
  return static_cast<double>((hi << 21) | (lo >> 11)) * 0x1p-53;
}

// An integer in [0, n) (Python's randint(0, n - 1)) by multiply-shift: bias below n / 2^32.
std::int64_t below(std::uint64_t stream, std::uint64_t word, std::int64_t n) {
  return static_cast<std::int64_t>((random_bits(stream, word) * static_cast<std::uint64_t>(n)) >> 32);
}

// Python's round(): half to even (the default floating-point rounding mode).
std::int64_t round_even(double v) { return static_cast<std::int64_t>(std::nearbyint(v)); }

// One axis of the resampling: output coordinate d reads source coordinate
// (d + offset + 0.5) * scale - 0.5 of a window [origin, origin + extent) of the image.
struct Taps {
  std::vector<std::int64_t> near, far;  // the two neighbours, absolute image coordinates
  std::vector<float> weight;            // of `far`; `near` gets 1 - weight
};

Taps taps(std::int64_t out, std::int64_t origin, std::int64_t extent, std::int64_t resized, std::int64_t offset) {
  Taps t;
  t.near.resize(static_cast<std::size_t>(out));
  t.far.resize(static_cast<std::size_t>(out));
  t.weight.resize(static_cast<std::size_t>(out));
  const double scale = static_cast<double>(extent) / static_cast<double>(resized);
  for (std::int64_t d = 0; d < out; ++d) {
    // PyTorch's area_pixel_compute_source_index: negative coordinates clamp to 0.
    const double src = std::max(0.0, (static_cast<double>(d + offset) + 0.5) * scale - 0.5);
    const std::int64_t i0 = std::min(static_cast<std::int64_t>(src), extent - 1);
    const std::int64_t i1 = std::min(i0 + 1, extent - 1);
    const auto k = static_cast<std::size_t>(d);
    t.near[k] = origin + i0;
    t.far[k] = origin + i1;
    t.weight[k] = static_cast<float>(src - static_cast<double>(i0));
  }
  return t;
}

}  // namespace

std::uint64_t augment_stream(std::uint64_t seed, std::int64_t epoch, std::int64_t index) {
  const std::uint64_t s = splitmix64(seed ^ kAugmentSalt);
  return splitmix64(splitmix64(s ^ static_cast<std::uint64_t>(epoch)) ^ static_cast<std::uint64_t>(index));
}

CropBox random_resized_crop_box(std::int64_t height, std::int64_t width, std::uint64_t stream) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int t = 0; t < kCropTries; ++t) {
    const std::uint64_t w0 = 8 * static_cast<std::uint64_t>(t);
    const double target = area * (0.08 + (1.0 - 0.08) * uniform53(stream, w0));
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * uniform53(stream, w0 + 2));
    const std::int64_t w = round_even(std::sqrt(target * ratio));
    const std::int64_t h = round_even(std::sqrt(target / ratio));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      return {below(stream, w0 + 4, height - h + 1), below(stream, w0 + 5, width - w + 1), h, w};
    }
  }
  // No try fitted (a very long or tall image): the whole image, its ratio clamped into range.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  std::int64_t w = width, h = height;
  if (in_ratio < 3.0 / 4.0) {
    h = round_even(static_cast<double>(w) / (3.0 / 4.0));
  } else if (in_ratio > 4.0 / 3.0) {
    w = round_even(static_cast<double>(h) * (4.0 / 3.0));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

bool random_flip(std::uint64_t stream) { return (random_bits(stream, kFlipWord) >> 31) != 0; }

void resample_normalize(const RgbImage& image, const ResamplePlan& p, std::int64_t out_h, std::int64_t out_w,
                        float* out) {
  const CropBox& b = p.box;
  MIXPREC_ASSERT(b.top >= 0 && b.left >= 0 && b.height >= 1 && b.width >= 1 && b.top + b.height <= image.height &&
                 b.left + b.width <= image.width);
  MIXPREC_ASSERT(p.offset_y >= 0 && p.offset_x >= 0 && p.offset_y + out_h <= p.resized_height &&
                 p.offset_x + out_w <= p.resized_width);
  const Taps ty = taps(out_h, b.top, b.height, p.resized_height, p.offset_y);
  const Taps tx = taps(out_w, b.left, b.width, p.resized_width, p.offset_x);
  const std::uint8_t* px = image.rgb.data();
  const std::int64_t stride = 3 * image.width;
  const std::int64_t plane = out_h * out_w;
  for (std::int64_t y = 0; y < out_h; ++y) {
    const auto ky = static_cast<std::size_t>(y);
    const std::uint8_t* r0 = px + ty.near[ky] * stride;
    const std::uint8_t* r1 = px + ty.far[ky] * stride;
    const float wy = ty.weight[ky];
    for (std::int64_t x = 0; x < out_w; ++x) {
      // A flipped output reads its mirror column: flipping after the resize, as torchvision's
      // RandomHorizontalFlip after RandomResizedCrop.
      const auto kx = static_cast<std::size_t>(p.flip ? out_w - 1 - x : x);
      const std::int64_t c0 = 3 * tx.near[kx], c1 = 3 * tx.far[kx];
      const float wx = tx.weight[kx];
      for (int c = 0; c < 3; ++c) {
        const float top = (1.0f - wx) * r0[c0 + c] + wx * r0[c1 + c];
        const float bottom = (1.0f - wx) * r1[c0 + c] + wx * r1[c1 + c];
        const float v = (1.0f - wy) * top + wy * bottom;
        out[c * plane + y * out_w + x] = (v / 255.0f - kImageNetMean[c]) / kImageNetStd[c];
      }
    }
  }
}

void train_transform(const RgbImage& image, std::int64_t out_h, std::int64_t out_w, std::uint64_t seed,
                     std::int64_t epoch, std::int64_t index, float* out) {
  const std::uint64_t stream = augment_stream(seed, epoch, index);
  ResamplePlan p;
  p.box = random_resized_crop_box(image.height, image.width, stream);
  p.resized_height = out_h;
  p.resized_width = out_w;
  p.flip = random_flip(stream);
  resample_normalize(image, p, out_h, out_w, out);
}

void eval_transform(const RgbImage& image, std::int64_t out_h, std::int64_t out_w, float* out) {
  // torchvision's Resize(R) with R an int: the shorter side becomes R, the longer
  // int(R * long / short) (truncated); equal sides both become R.
  const std::int64_t r = std::max(out_h, out_w) * 256 / 224;
  ResamplePlan p;
  p.box = {0, 0, image.height, image.width};
  if (image.width <= image.height) {
    p.resized_width = r;
    p.resized_height = r * image.height / image.width;
  } else {
    p.resized_height = r;
    p.resized_width = r * image.width / image.height;
  }
  p.offset_y = round_even(static_cast<double>(p.resized_height - out_h) / 2.0);
  p.offset_x = round_even(static_cast<double>(p.resized_width - out_w) / 2.0);
  resample_normalize(image, p, out_h, out_w, out);
}

}  // namespace mixprec::data::detail
