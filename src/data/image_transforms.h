#pragma once
// torchvision's standard ImageNet transforms on a decoded RgbImage, written into a [3, H, W] f32
// sample: training = RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3, bilinear) + horizontal
// flip with p = 0.5; evaluation = resize of the shorter side to floor(S * 256 / 224), centre crop.
// Both end in ToTensor (x / 255) and Normalize with the ImageNet mean and standard deviation.
// Every random choice is drawn from a counter-based stream keyed by (seed, epoch, sample index),
// so a sample's augmentation does not depend on which thread made it or in what order.
#include <cstdint>

#include "data/image_decode.h"

namespace mixprec::data::detail {

/// The ImageNet statistics of torchvision's reference recipes, per RGB channel.
inline constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
inline constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};

/// A rectangle of an image, in pixels.
struct CropBox {
  std::int64_t top = 0, left = 0, height = 0, width = 0;
};

/// The random stream of sample `index` in `epoch` under `seed` (a splitmix64 chain; its words
/// are read with core/random.h's random_bits).
std::uint64_t augment_stream(std::uint64_t seed, std::int64_t epoch, std::int64_t index);

/// RandomResizedCrop's box for an image of height x width (torchvision's get_params): up to 10
/// tries of an area share in [0.08, 1] and a log-uniform aspect ratio in [3/4, 4/3], rounded
/// half to even as Python's round(); the first that fits is placed uniformly; else the
/// largest centred box whose ratio is clamped into the range. Draws come from `stream`.
CropBox random_resized_crop_box(std::int64_t height, std::int64_t width, std::uint64_t stream);
/// Whether the sample of `stream` is flipped left to right (probability 1/2).
bool random_flip(std::uint64_t stream);

/// Bilinear resampling of box to out_h x out_w as PyTorch's upsample_bilinear2d with
/// align_corners=False (half-pixel centres, source coordinates clamped at 0, neighbours
/// clamped inside the box), without antialiasing: downscaling by more than 2x skips pixels
/// (torchvision's antialias=True would average them). The result is mirrored left to right when
/// flip, divided by 255 and normalised with kImageNetMean/kImageNetStd into out [3, out_h,
/// out_w]. `resized_height`/`resized_width` and `offset_y`/`offset_x` describe an evaluation
/// crop: the box is first scaled to resized_* and the output is the window at the offsets.
/// For a plain crop-and-resize give resized = out and offsets 0.
struct ResamplePlan {
  CropBox box;
  std::int64_t resized_height = 0, resized_width = 0;
  std::int64_t offset_y = 0, offset_x = 0;
  bool flip = false;
};
void resample_normalize(const RgbImage& image, const ResamplePlan& plan, std::int64_t out_h, std::int64_t out_w,
                        float* out);

/// The training transform of sample `index` in `epoch`: RandomResizedCrop to out_h x out_w, flip,
/// normalise, into out [3, out_h, out_w].
void train_transform(const RgbImage& image, std::int64_t out_h, std::int64_t out_w, std::uint64_t seed,
                     std::int64_t epoch, std::int64_t index, float* out);
/// The evaluation transform: the shorter side resized to floor(max(out_h, out_w) * 256 / 224)
/// (the longer in proportion, truncated, as torchvision's Resize), the centre out_h x out_w
/// window (offsets rounded half to even, as torchvision's CenterCrop), normalised into out.
void eval_transform(const RgbImage& image, std::int64_t out_h, std::int64_t out_w, float* out);

}  // namespace mixprec::data::detail
