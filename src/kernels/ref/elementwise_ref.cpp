// Reference elementwise kernels: plain scalar loops, the spec every vector path is tested against.
// Each element is loaded to f32, computed in f32 by its op's kernels::math struct (the
// per-element spec, elementwise_math.h) and rounded once to the output dtype.
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/spec/elementwise_math.h"

namespace mixprec::kernels::ref {
namespace {

/// Calls fn(M{}) with M the kernels::math struct of op, so the per-element loop has no switch.
template <class Fn>
void with_unary(UnaryOp op, Fn&& fn) {
  switch (op) {
#define MIXPREC_UNARY_CASE(o, ...) \
  case UnaryOp::o: return fn(math::o{});
    MIXPREC_UNARY_OPS(MIXPREC_UNARY_CASE)
#undef MIXPREC_UNARY_CASE
  }
  MIXPREC_ASSERT(false);
}

template <class Fn>
void with_binary(BinaryOp op, Fn&& fn) {
  switch (op) {
#define MIXPREC_BINARY_CASE(o, ...) \
  case BinaryOp::o: return fn(math::o{});
    MIXPREC_BINARY_OPS(MIXPREC_BINARY_CASE)
#undef MIXPREC_BINARY_CASE
  }
  MIXPREC_ASSERT(false);
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
  dispatch(in.dtype, out_dtype, [&](auto ti, auto to) {
    using TI = decltype(ti);
    using TO = decltype(to);
    const TI* src = static_cast<const TI*>(in.data);
    TO* dst = static_cast<TO*>(out);
    with_unary(op, [&](auto m) {
      for_each_index(shape, strides, [&](std::int64_t i, const std::int64_t* off) {
        dst[i] = TO(m.forward(static_cast<float>(src[off[0]])));
      });
    });
  });
}

void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype) {
  const std::span<const std::int64_t> strides[2] = {a.strides, b.strides};
  dispatch(a.dtype, b.dtype, out_dtype, [&](auto ta, auto tb, auto to) {
    using TA = decltype(ta);
    using TB = decltype(tb);
    using TO = decltype(to);
    const TA* pa = static_cast<const TA*>(a.data);
    const TB* pb = static_cast<const TB*>(b.data);
    TO* dst = static_cast<TO*>(out);
    with_binary(op, [&](auto m) {
      for_each_index(shape, strides, [&](std::int64_t i, const std::int64_t* off) {
        dst[i] = TO(m.apply(static_cast<float>(pa[off[0]]), static_cast<float>(pb[off[1]])));
      });
    });
  });
}

void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta) {
  dispatch(in_dtype, out_dtype, [&](auto ti, auto to) {
    using TI = decltype(ti);
    using TO = decltype(to);
    const TI* src = static_cast<const TI*>(in);
    TO* dst = static_cast<TO*>(out);
    for (std::int64_t i = 0; i < n; ++i) dst[i] = TO(alpha * static_cast<float>(src[i]) + beta);
  });
}

void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n) {
  // Only the operand the formula reads is touched (the other may be null).
  const bool use_x = grad_reads_x(op);
  const void* in = use_x ? x : y;
  const DType in_dtype = use_x ? x_dtype : y_dtype;
  MIXPREC_CHECK(in != nullptr || n == 0, ValueError, "unary_backward",
                name(op) << " backward needs the forward " << (use_x ? "input x" : "output y"));
  dispatch(in_dtype, dy_dtype, dx_dtype, [&](auto ti, auto tg, auto to) {
    using TI = decltype(ti);
    using TG = decltype(tg);
    using TO = decltype(to);
    const TI* v = static_cast<const TI*>(in);
    const TG* g = static_cast<const TG*>(dy);
    TO* dst = static_cast<TO*>(dx);
    with_unary(op, [&](auto m) {
      for (std::int64_t i = 0; i < n; ++i) {
        dst[i] = TO(m.backward(static_cast<float>(v[i]), static_cast<float>(g[i])));
      }
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
