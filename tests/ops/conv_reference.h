#pragma once
// Convolution and pooling in double, independent of mixprec: the references the conv and pool
// gradchecks (NCHW and channels-last) hold mixprec's ops to. Inputs and outputs NCHW, row-major.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gradcheck.h"

namespace mixprec::testing {

struct ConvCfg {
  std::int64_t n, c, h, w, o, k, stride, padding;
  std::int64_t ho() const { return (h + 2 * padding - k) / stride + 1; }
  std::int64_t wo() const { return (w + 2 * padding - k) / stride + 1; }
};

// conv2d in double, independent of mixprec: direct loops over NCHW / OIHW.
inline VecD conv_ref(const ConvCfg& g, const VecD& x, const VecD& w, const VecD* b) {
  VecD y(static_cast<std::size_t>(g.n * g.o * g.ho() * g.wo()));
  std::size_t i = 0;
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t o = 0; o < g.o; ++o)
      for (std::int64_t oy = 0; oy < g.ho(); ++oy)
        for (std::int64_t ox = 0; ox < g.wo(); ++ox) {
          double acc = b != nullptr ? (*b)[static_cast<std::size_t>(o)] : 0.0;
          for (std::int64_t c = 0; c < g.c; ++c)
            for (std::int64_t ky = 0; ky < g.k; ++ky)
              for (std::int64_t kx = 0; kx < g.k; ++kx) {
                const std::int64_t iy = oy * g.stride - g.padding + ky;
                const std::int64_t ix = ox * g.stride - g.padding + kx;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                acc += x[static_cast<std::size_t>(((n * g.c + c) * g.h + iy) * g.w + ix)] *
                       w[static_cast<std::size_t>(((o * g.c + c) * g.k + ky) * g.k + kx)];
              }
          y[i++] = acc;
        }
  return y;
}

// Max / average pooling in double (padding never wins / is not counted).
inline VecD pool_ref(const VecD& x, std::int64_t planes, std::int64_t h, std::int64_t w,
              std::int64_t k, std::int64_t s, std::int64_t p, bool max) {
  const std::int64_t ho = (h + 2 * p - k) / s + 1, wo = (w + 2 * p - k) / s + 1;
  VecD y;
  for (std::int64_t q = 0; q < planes; ++q)
    for (std::int64_t oy = 0; oy < ho; ++oy)
      for (std::int64_t ox = 0; ox < wo; ++ox) {
        double best = -INFINITY, sum = 0;
        int count = 0;
        for (std::int64_t iy = oy * s - p; iy < oy * s - p + k; ++iy)
          for (std::int64_t ix = ox * s - p; ix < ox * s - p + k; ++ix) {
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const double v = x[static_cast<std::size_t>((q * h + iy) * w + ix)];
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        y.push_back(max ? best : sum / count);
      }
  return y;
}

}  // namespace mixprec::testing
