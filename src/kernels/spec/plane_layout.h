#pragma once
/// Where the elements of one [h, w] plane (sample n, channel c) of a 4-D activation lie in
/// memory, NCHW or channels-last (NHWC), written once for host and device (MIXPREC_HD): the
/// reference convolution and pooling loops and the CUDA pooling kernels index through these, so
/// one kernel body serves both layouts.
#include <cstdint>

#include "kernels/spec/host_device.h"

namespace mixprec::kernels {

/// Element k = row * w + col of one plane is at base + k * step.
struct PlaneLayout {
  std::int64_t base, step;
  MIXPREC_HD std::int64_t at(std::int64_t k) const { return base + k * step; }
};

/// The plane of sample n, channel c in a tensor of `channels` channels and planes of
/// `plane_size` elements: NCHW planes are runs of plane_size; a channels-last plane is every
/// channels-th element, starting at the sample's first pixel plus c.
MIXPREC_HD inline PlaneLayout plane_layout(bool channels_last, std::int64_t n, std::int64_t c,
                                           std::int64_t channels, std::int64_t plane_size) {
  return channels_last ? PlaneLayout{n * plane_size * channels + c, channels}
                       : PlaneLayout{(n * channels + c) * plane_size, 1};
}

/// The sample, channel and in-plane index of the element at memory position i.
struct PlaneIndex {
  std::int64_t n, c, k;
};

MIXPREC_HD inline PlaneIndex plane_index(bool channels_last, std::int64_t i,
                                         std::int64_t channels, std::int64_t plane_size) {
  const std::int64_t per_sample = channels * plane_size;
  if (channels_last) return {i / per_sample, i % channels, i % per_sample / channels};
  return {i / per_sample, i % per_sample / plane_size, i % plane_size};
}

}  // namespace mixprec::kernels
