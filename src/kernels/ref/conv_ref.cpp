// Reference 2-D convolution, forward and both backward passes: direct loops with f32
// accumulation and one rounding per output element, indexing activations NCHW or channels-last
// through plane_layout() (the sums' order is the same in both). The spec the oneDNN path is tested against.
#include <algorithm>
#include <vector>

#include "kernels/conv.h"
#include "kernels/spec/plane_layout.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {

void validate_conv2d(const char* op, const Conv2dDesc& d) {
  require_compute_dtype(op, d.dtype);  // fp8 has no convolution (and must not be widened here)
  require_compute_dtype(op, d.bias_dtype);
  MIXPREC_CHECK(d.n >= 0 && d.c >= 0 && d.h >= 0 && d.w >= 0 && d.o >= 0, ShapeError, op,
                "negative extent: input [" << d.n << ", " << d.c << ", " << d.h << ", " << d.w
                                           << "], " << d.o << " output channels");
  MIXPREC_CHECK(d.kh >= 1 && d.kw >= 1, ShapeError, op,
                "kernel must be at least 1x1, got " << d.kh << "x" << d.kw);
  MIXPREC_CHECK(d.stride >= 1, ValueError, op, "stride must be >= 1, got " << d.stride);
  MIXPREC_CHECK(d.padding >= 0, ValueError, op, "padding must be >= 0, got " << d.padding);
  MIXPREC_CHECK(d.h + 2 * d.padding >= d.kh && d.w + 2 * d.padding >= d.kw, ShapeError, op,
                "kernel " << d.kh << "x" << d.kw << " is larger than the padded input "
                          << d.h + 2 * d.padding << "x" << d.w + 2 * d.padding
                          << "; use a smaller kernel or more padding");
  MIXPREC_CHECK(!d.has_bias || d.bias_dtype == d.dtype || d.bias_dtype == DType::f32, DTypeError,
                op, "bias is " << name(d.bias_dtype) << " but the input is " << name(d.dtype)
                               << "; use the input's dtype or f32 for the bias");
}

namespace ref {
namespace {

// Input row/col of output position `out` and kernel tap `k`; may fall in the padding.
inline std::int64_t in_pos(std::int64_t out, std::int64_t k, const Conv2dDesc& d) {
  return out * d.stride - d.padding + k;
}

template <class T>
float f(const T* p, std::int64_t i) {
  return static_cast<float>(p[i]);
}

// Offset of input element (n, c, iy, ix) and output element (n, o, oy, ox) in d's layout.
inline std::int64_t x_at(const Conv2dDesc& d, std::int64_t n, std::int64_t c, std::int64_t iy,
                         std::int64_t ix) {
  return plane_layout(d.channels_last, n, c, d.c, d.h * d.w).at(iy * d.w + ix);
}
inline std::int64_t y_at(const Conv2dDesc& d, std::int64_t n, std::int64_t o, std::int64_t oy,
                         std::int64_t ox) {
  return plane_layout(d.channels_last, n, o, d.o, d.out_h() * d.out_w()).at(oy * d.out_w() + ox);
}

}  // namespace

void conv2d(const Conv2dDesc& d, const void* x_raw, const void* w_raw, const void* b_raw,
            void* y_raw) {
  validate_conv2d("conv2d", d);
  const std::int64_t ho = d.out_h(), wo = d.out_w();
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(x_raw);
    const T* wt = static_cast<const T*>(w_raw);
    T* y = static_cast<T*>(y_raw);
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t o = 0; o < d.o; ++o) {
        const float b = d.has_bias ? dispatch(d.bias_dtype, [&](auto bt) {
          return f(static_cast<const decltype(bt)*>(b_raw), o);
        }) : 0.0f;
        for (std::int64_t oy = 0; oy < ho; ++oy) {
          for (std::int64_t ox = 0; ox < wo; ++ox) {
            float acc = 0.0f;
            for (std::int64_t c = 0; c < d.c; ++c) {
              for (std::int64_t ky = 0; ky < d.kh; ++ky) {
                const std::int64_t iy = in_pos(oy, ky, d);
                if (iy < 0 || iy >= d.h) continue;
                for (std::int64_t kx = 0; kx < d.kw; ++kx) {
                  const std::int64_t ix = in_pos(ox, kx, d);
                  if (ix < 0 || ix >= d.w) continue;
                  acc += f(x, x_at(d, n, c, iy, ix)) *
                         f(wt, ((o * d.c + c) * d.kh + ky) * d.kw + kx);
                }
              }
            }
            y[y_at(d, n, o, oy, ox)] = T(acc + b);
          }
        }
      }
    }
  });
}

void conv2d_backward_data(const Conv2dDesc& d, const void* dy_raw, const void* w_raw,
                          void* dx_raw) {
  validate_conv2d("conv2d_backward_data", d);
  const std::int64_t ho = d.out_h(), wo = d.out_w();
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = static_cast<const T*>(dy_raw);
    const T* wt = static_cast<const T*>(w_raw);
    T* dx = static_cast<T*>(dx_raw);
    // Scatter into an f32 image per sample so each dx element is rounded once.
    std::vector<float> acc(static_cast<std::size_t>(d.c * d.h * d.w));
    for (std::int64_t n = 0; n < d.n; ++n) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t o = 0; o < d.o; ++o) {
        for (std::int64_t oy = 0; oy < ho; ++oy) {
          for (std::int64_t ox = 0; ox < wo; ++ox) {
            const float g = f(dy, y_at(d, n, o, oy, ox));
            for (std::int64_t c = 0; c < d.c; ++c) {
              for (std::int64_t ky = 0; ky < d.kh; ++ky) {
                const std::int64_t iy = in_pos(oy, ky, d);
                if (iy < 0 || iy >= d.h) continue;
                for (std::int64_t kx = 0; kx < d.kw; ++kx) {
                  const std::int64_t ix = in_pos(ox, kx, d);
                  if (ix < 0 || ix >= d.w) continue;
                  acc[static_cast<std::size_t>((c * d.h + iy) * d.w + ix)] +=
                      g * f(wt, ((o * d.c + c) * d.kh + ky) * d.kw + kx);
                }
              }
            }
          }
        }
      }
      for (std::int64_t c = 0; c < d.c; ++c) {
        const PlaneLayout out = plane_layout(d.channels_last, n, c, d.c, d.h * d.w);
        for (std::int64_t k = 0; k < d.h * d.w; ++k) {
          dx[out.at(k)] = T(acc[static_cast<std::size_t>(c * d.h * d.w + k)]);
        }
      }
    }
  });
}

void conv2d_backward_weights(const Conv2dDesc& d, const void* x_raw, const void* dy_raw,
                             void* dw_raw, void* db_raw) {
  validate_conv2d("conv2d_backward_weights", d);
  const std::int64_t ho = d.out_h(), wo = d.out_w();
  dispatch(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(x_raw);
    const T* dy = static_cast<const T*>(dy_raw);
    T* dw = static_cast<T*>(dw_raw);
    for (std::int64_t o = 0; o < d.o; ++o) {
      for (std::int64_t c = 0; c < d.c; ++c) {
        for (std::int64_t ky = 0; ky < d.kh; ++ky) {
          for (std::int64_t kx = 0; kx < d.kw; ++kx) {
            float acc = 0.0f;
            for (std::int64_t n = 0; n < d.n; ++n) {
              for (std::int64_t oy = 0; oy < ho; ++oy) {
                const std::int64_t iy = in_pos(oy, ky, d);
                if (iy < 0 || iy >= d.h) continue;
                for (std::int64_t ox = 0; ox < wo; ++ox) {
                  const std::int64_t ix = in_pos(ox, kx, d);
                  if (ix < 0 || ix >= d.w) continue;
                  acc += f(dy, y_at(d, n, o, oy, ox)) * f(x, x_at(d, n, c, iy, ix));
                }
              }
            }
            dw[((o * d.c + c) * d.kh + ky) * d.kw + kx] = T(acc);
          }
        }
      }
      if (db_raw != nullptr) {
        float acc = 0.0f;
        for (std::int64_t n = 0; n < d.n; ++n) {
          const PlaneLayout plane = plane_layout(d.channels_last, n, o, d.o, ho * wo);
          for (std::int64_t i = 0; i < ho * wo; ++i) acc += f(dy, plane.at(i));
        }
        dispatch(d.bias_dtype, [&](auto bt) {
          using B = decltype(bt);
          static_cast<B*>(db_raw)[o] = B(acc);
        });
      }
    }
  });
}

}  // namespace ref
}  // namespace mixprec::kernels
