// Reference elementwise kernels: plain scalar loops, the spec every vector path is tested against.
// Each element is loaded to f32, computed in f32 with the std:: functions and rounded once to
// the output dtype. NaN semantics follow torch: relu(NaN) = NaN, maximum/minimum propagate NaN.
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/ref/nan_minmax.h"

namespace mixprec::kernels::ref {
namespace {

constexpr float kSqrt1_2 = 0.70710678118654752f;    // 1/sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1/sqrt(2 pi)
// gelu_tanh: w = x (c1 + c2 x^2) = 2 sqrt(2/pi) (x + 0.044715 x^3); dw/dx = c1 + 3 c2 x^2.
constexpr float kGeluTanhC1 = 1.5957691216057308f;    // 2 sqrt(2/pi)
constexpr float kGeluTanhC2 = 0.071354816272600249f;  // 0.044715 * c1
constexpr float kGeluTanhC3 = 0.21406444881780075f;   // 3 * c2
/// Beyond |x| = 10 the gelu_tanh gradient is 1 (x > 10, exactly in f32) or 0 (x < -10, true
/// value below 3e-36); the formula is not evaluated there, so e^-w = Inf never meets s = 0.
constexpr float kGeluTanhGradEdge = 10.0f;

/// Calls fn(f) with f the float -> float function of op, so the per-element loop has no switch.
template <class Fn>
void with_unary(UnaryOp op, Fn&& fn) {
  switch (op) {
    case UnaryOp::neg: return fn([](float x) { return -x; });
    case UnaryOp::abs: return fn([](float x) { return std::fabs(x); });
    case UnaryOp::exp: return fn([](float x) { return std::exp(x); });
    case UnaryOp::log: return fn([](float x) { return std::log(x); });
    case UnaryOp::sqrt: return fn([](float x) { return std::sqrt(x); });
    case UnaryOp::rsqrt: return fn([](float x) { return 1.0f / std::sqrt(x); });
    case UnaryOp::reciprocal: return fn([](float x) { return 1.0f / x; });
    case UnaryOp::square: return fn([](float x) { return x * x; });
    // x > 0 or NaN keeps x; everything else (including -0) becomes +0.
    case UnaryOp::relu: return fn([](float x) { return (x > 0.0f || x != x) ? x : 0.0f; });
    // x * Phi(x) with Phi(x) = erfc(-x/sqrt2)/2: the same function as x/2 (1 + erf(x/sqrt2)),
    // but without the cancellation of 1 + erf for negative x.
    case UnaryOp::gelu:
      return fn([](float x) { return 0.5f * x * std::erfc(-x * kSqrt1_2); });
    case UnaryOp::tanh: return fn([](float x) { return std::tanh(x); });
    case UnaryOp::sigmoid: return fn([](float x) { return 1.0f / (1.0f + std::exp(-x)); });
    // 0.5 x (1 + tanh(w/2)) = x / (1 + e^-w): no cancellation of 1 + tanh for negative x.
    case UnaryOp::gelu_tanh:
      return fn([](float x) {
        const float w = x * (kGeluTanhC1 + kGeluTanhC2 * (x * x));
        return x / (1.0f + std::exp(-w));
      });
  }
  MIXPREC_ASSERT(false);
}

template <class Fn>
void with_binary(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::add: return fn([](float a, float b) { return a + b; });
    case BinaryOp::sub: return fn([](float a, float b) { return a - b; });
    case BinaryOp::mul: return fn([](float a, float b) { return a * b; });
    case BinaryOp::div: return fn([](float a, float b) { return a / b; });
    case BinaryOp::maximum: return fn([](float a, float b) { return nan_max(a, b); });
    case BinaryOp::minimum: return fn([](float a, float b) { return nan_min(a, b); });
    case BinaryOp::pow: return fn([](float a, float b) { return std::pow(a, b); });
    case BinaryOp::eq: return fn([](float a, float b) { return a == b ? 1.0f : 0.0f; });
    case BinaryOp::ge: return fn([](float a, float b) { return a >= b ? 1.0f : 0.0f; });
  }
  MIXPREC_ASSERT(false);
}

/// dx from (x, y, dy) for each op; each formula reads only x or only y.
template <class Fn>
void with_unary_grad(UnaryOp op, Fn&& fn) {
  switch (op) {
    case UnaryOp::neg: return fn([](float, float, float dy) { return -dy; });
    case UnaryOp::abs:  // sign(x) dy; sign(0) = 0, sign(NaN) = NaN
      return fn([](float x, float, float dy) {
        const float s = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x;
        return s * dy;
      });
    case UnaryOp::exp: return fn([](float, float y, float dy) { return dy * y; });
    case UnaryOp::log: return fn([](float x, float, float dy) { return dy / x; });
    case UnaryOp::sqrt: return fn([](float, float y, float dy) { return dy / (2.0f * y); });
    case UnaryOp::rsqrt:  // d x^{-1/2} = -x^{-3/2}/2 = -y^3/2
      return fn([](float, float y, float dy) { return dy * (-0.5f * y * y * y); });
    case UnaryOp::reciprocal: return fn([](float, float y, float dy) { return dy * (-(y * y)); });
    case UnaryOp::square: return fn([](float x, float, float dy) { return dy * (2.0f * x); });
    case UnaryOp::relu: return fn([](float x, float, float dy) { return x > 0.0f ? dy : 0.0f; });
    case UnaryOp::gelu:  // Phi(x) + x phi(x)
      return fn([](float x, float, float dy) {
        const float cdf = 0.5f * std::erfc(-x * kSqrt1_2);
        const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
        return dy * (cdf + x * pdf);
      });
    case UnaryOp::tanh: return fn([](float, float y, float dy) { return dy * (1.0f - y * y); });
    case UnaryOp::sigmoid:
      return fn([](float, float y, float dy) { return dy * (y * (1.0f - y)); });
    // d/dx x s(w) = s + x s (1 - s) w' = s (1 + x w' e s), e = e^-w, s = 1 / (1 + e) (1 - s =
    // e s without the cancellation of 1 - s).
    case UnaryOp::gelu_tanh:
      return fn([](float x, float, float dy) {
        const float x2 = x * x;
        const float w = x * (kGeluTanhC1 + kGeluTanhC2 * x2);
        const float wp = kGeluTanhC1 + kGeluTanhC3 * x2;
        const float e = std::exp(-w);
        const float s = 1.0f / (1.0f + e);
        const float g = s * (1.0f + (x * wp) * (e * s));
        return dy * (x > kGeluTanhGradEdge ? 1.0f : x < -kGeluTanhGradEdge ? 0.0f : g);
      });
  }
  MIXPREC_ASSERT(false);
}

/// Whether the backward formula of op reads x (else it reads y).
bool grad_reads_x(UnaryOp op) {
  switch (op) {
    case UnaryOp::abs: case UnaryOp::log: case UnaryOp::square: case UnaryOp::relu:
    case UnaryOp::gelu: case UnaryOp::gelu_tanh:
      return true;
    default:
      return false;
  }
}

std::int64_t numel(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    MIXPREC_CHECK(d >= 0, ShapeError, "elementwise", "negative dimension " << d << " in shape");
    n *= d;
  }
  return n;
}

/// Visits every index of `shape` in row-major order (an odometer over the outer dimensions and a
/// plain loop over the last one), calling body(out_index, offsets...) with each operand's offset.
template <std::size_t K, class Body>
void for_each_index(std::span<const std::int64_t> shape,
                    const std::span<const std::int64_t> (&strides)[K], Body&& body) {
  const std::int64_t total = numel(shape);
  if (total == 0) return;
  const std::size_t rank = shape.size();
  for (std::size_t k = 0; k < K; ++k) {
    MIXPREC_CHECK(strides[k].size() == rank, ShapeError, "elementwise",
                  "operand has " << strides[k].size() << " strides for a rank-" << rank
                                 << " shape; pass one stride per dimension");
  }
  if (rank == 0) {
    std::int64_t off[K] = {};
    body(std::int64_t{0}, off);
    return;
  }
  const std::int64_t inner = shape[rank - 1];
  std::vector<std::int64_t> idx(rank, 0);
  std::int64_t off[K] = {};
  for (std::int64_t out = 0; out < total; out += inner) {
    std::int64_t o[K];
    for (std::size_t k = 0; k < K; ++k) o[k] = off[k];
    for (std::int64_t j = 0; j < inner; ++j) {
      body(out + j, o);
      for (std::size_t k = 0; k < K; ++k) o[k] += strides[k][rank - 1];
    }
    // Advance the odometer over the outer dimensions.
    for (std::size_t d = rank - 1; d-- > 0;) {
      for (std::size_t k = 0; k < K; ++k) off[k] += strides[k][d];
      if (++idx[d] < shape[d]) break;
      for (std::size_t k = 0; k < K; ++k) off[k] -= strides[k][d] * shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype) {
  const std::span<const std::int64_t> strides[1] = {in.strides};
  dispatch(in.dtype, [&](auto ti) {
    using TI = decltype(ti);
    dispatch(out_dtype, [&](auto to) {
      using TO = decltype(to);
      const TI* src = static_cast<const TI*>(in.data);
      TO* dst = static_cast<TO*>(out);
      with_unary(op, [&](auto f) {
        for_each_index(shape, strides, [&](std::int64_t i, const std::int64_t* off) {
          dst[i] = TO(f(static_cast<float>(src[off[0]])));
        });
      });
    });
  });
}

void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype) {
  const std::span<const std::int64_t> strides[2] = {a.strides, b.strides};
  dispatch(a.dtype, [&](auto ta) {
    using TA = decltype(ta);
    dispatch(b.dtype, [&](auto tb) {
      using TB = decltype(tb);
      dispatch(out_dtype, [&](auto to) {
        using TO = decltype(to);
        const TA* pa = static_cast<const TA*>(a.data);
        const TB* pb = static_cast<const TB*>(b.data);
        TO* dst = static_cast<TO*>(out);
        with_binary(op, [&](auto f) {
          for_each_index(shape, strides, [&](std::int64_t i, const std::int64_t* off) {
            dst[i] = TO(f(static_cast<float>(pa[off[0]]), static_cast<float>(pb[off[1]])));
          });
        });
      });
    });
  });
}

void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta) {
  dispatch(in_dtype, [&](auto ti) {
    using TI = decltype(ti);
    dispatch(out_dtype, [&](auto to) {
      using TO = decltype(to);
      const TI* src = static_cast<const TI*>(in);
      TO* dst = static_cast<TO*>(out);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = TO(alpha * static_cast<float>(src[i]) + beta);
    });
  });
}

void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n) {
  // Only the operand the formula reads is touched (the other may be null); it is passed twice
  // so one instantiation serves both.
  const bool use_x = grad_reads_x(op);
  const void* in = use_x ? x : y;
  const DType in_dtype = use_x ? x_dtype : y_dtype;
  MIXPREC_CHECK(in != nullptr || n == 0, ValueError, "unary_backward",
                name(op) << " backward needs the forward " << (use_x ? "input x" : "output y"));
  dispatch(in_dtype, [&](auto ti) {
    using TI = decltype(ti);
    dispatch(dy_dtype, [&](auto tg) {
      using TG = decltype(tg);
      dispatch(dx_dtype, [&](auto to) {
        using TO = decltype(to);
        const TI* v = static_cast<const TI*>(in);
        const TG* g = static_cast<const TG*>(dy);
        TO* dst = static_cast<TO*>(dx);
        with_unary_grad(op, [&](auto f) {
          for (std::int64_t i = 0; i < n; ++i) {
            const float vi = static_cast<float>(v[i]);
            dst[i] = TO(f(vi, vi, static_cast<float>(g[i])));
          }
        });
      });
    });
  });
}

void fill(void* out, DType dtype, std::int64_t n, float value) {
  dispatch(dtype, [&](auto t) {
    using T = decltype(t);
    const T v(value);
    T* dst = static_cast<T*>(out);
    for (std::int64_t i = 0; i < n; ++i) dst[i] = v;
  });
}

}  // namespace mixprec::kernels::ref
