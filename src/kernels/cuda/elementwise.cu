// The CUDA elementwise kernels: the reference's per-element math (kernels::math in
// elementwise_math.h, the same structs the reference loops over), one thread per output element
// or per pack of 8 (vector_io.cuh: 16-byte loads and stores where every operand is contiguous
// and 16-byte aligned, the same per-element math). Values are widened to f32 and rounded once
// (RNE) to the output dtype by the host's own conversion functions (core/half.h, constexpr);
// nvcc builds with --fmad=false, so a*b+c is two roundings here as in the reference, and every op
// whose list row says simd 0 gives the reference's bits. Transcendentals use CUDA's libdevice
// (within the op list's bounds). Deterministic: each element is one thread's, no reductions.
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layout_collapse.cuh"
#include "kernels/cuda/vector_io.cuh"
#include "kernels/elementwise.h"
#include "kernels/spec/elementwise_math.h"

namespace mixprec::kernels::cuda {
namespace {

/// Strided operands are read through l, collapsed (layout_collapse.cuh); contiguous ones
/// through map_elements.
template <class Op>
__global__ void unary_kernel(Layout l, std::int64_t n, ElementwisePath path, const void* in,
                             DType din, void* out, DType dout) {
  const auto f = [](float v) { return Op::forward(v); };
  if (path != ElementwisePath::strided) {
    map_elements(n, path, RoundedOut{out, dout}, f, WidenedIn{in, din});
    return;
  }
  MIXPREC_GRID_STRIDE(i, n) store(out, dout, i, f(load(in, din, collapsed_offset(l, 0, i))));
}

template <class Op>
__global__ void binary_kernel(Layout l, std::int64_t n, ElementwisePath path, const void* a,
                              DType da, const void* b, DType db, void* out, DType dout) {
  const auto f = [](float x, float y) { return Op::apply(x, y); };
  if (path != ElementwisePath::strided) {
    map_elements(n, path, RoundedOut{out, dout}, f, WidenedIn{a, da}, WidenedIn{b, db});
    return;
  }
  MIXPREC_GRID_STRIDE(i, n) {
    store(out, dout, i,
          f(load(a, da, collapsed_offset(l, 0, i)), load(b, db, collapsed_offset(l, 1, i))));
  }
}

template <class Op>
__global__ void unary_backward_kernel(std::int64_t n, ElementwisePath path, const void* v,
                                      DType dv, const void* dy, DType dg, void* dx, DType dout) {
  map_elements(n, path, RoundedOut{dx, dout}, [](float x, float g) { return Op::backward(x, g); },
               WidenedIn{v, dv}, WidenedIn{dy, dg});
}

__global__ void affine_kernel(std::int64_t n, ElementwisePath path, const void* in, DType din,
                              void* out, DType dout, float alpha, float beta) {
  map_elements(n, path, RoundedOut{out, dout}, [alpha, beta](float x) { return alpha * x + beta; },
               WidenedIn{in, din});
}

__global__ void fill_kernel(std::int64_t n, ElementwisePath path, void* out, DType dt,
                            float value) {
  map_elements(n, path, RoundedOut{out, dt}, [value]() { return value; });
}

}  // namespace

void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype) {
  const Layout full = layout(name(op), shape, in.strides, in.strides);
  const std::int64_t n = numel(full);
  if (n == 0) return;
  const Layout l = collapsed(full);
  const ElementwisePath path = elementwise_path(row_major_contiguous(shape, in.strides),
                                                {{in.data, in.dtype}, {out, out_dtype}});
  switch (op) {
#define MIXPREC_CUDA_UNARY(o, ...)                                                   \
  case UnaryOp::o:                                                                   \
    unary_kernel<math::o><<<map_grid(n, path), kThreads, 0, stream()>>>(            \
        l, n, path, in.data, in.dtype, out, out_dtype);                              \
    break;
    MIXPREC_UNARY_OPS(MIXPREC_CUDA_UNARY)
#undef MIXPREC_CUDA_UNARY
  }
  check_launch(name(op));
}

void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype) {
  const Layout full = layout(name(op), shape, a.strides, b.strides);
  const std::int64_t n = numel(full);
  if (n == 0) return;
  const Layout l = collapsed(full);
  const bool contiguous =
      row_major_contiguous(shape, a.strides) && row_major_contiguous(shape, b.strides);
  const ElementwisePath path =
      elementwise_path(contiguous, {{a.data, a.dtype}, {b.data, b.dtype}, {out, out_dtype}});
  switch (op) {
#define MIXPREC_CUDA_BINARY(o, ...)                                                  \
  case BinaryOp::o:                                                                  \
    binary_kernel<math::o><<<map_grid(n, path), kThreads, 0, stream()>>>(           \
        l, n, path, a.data, a.dtype, b.data, b.dtype, out, out_dtype);               \
    break;
    MIXPREC_BINARY_OPS(MIXPREC_CUDA_BINARY)
#undef MIXPREC_CUDA_BINARY
  }
  check_launch(name(op));
}

void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta) {
  MIXPREC_CHECK(n >= 0, ShapeError, "affine", "negative element count " << n);
  if (n == 0) return;
  const ElementwisePath path = elementwise_path(true, {{in, in_dtype}, {out, out_dtype}});
  affine_kernel<<<map_grid(n, path), kThreads, 0, stream()>>>(n, path, in, in_dtype, out,
                                                              out_dtype, alpha, beta);
  check_launch("affine");
}

void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n) {
  MIXPREC_CHECK(n >= 0, ShapeError, "unary_backward", "negative element count " << n);
  const bool use_x = grad_reads_x(op);
  const void* v = use_x ? x : y;
  MIXPREC_CHECK(v != nullptr || n == 0, ValueError, "unary_backward",
                name(op) << " backward needs the forward " << (use_x ? "input x" : "output y"));
  if (n == 0) return;
  const DType dv = use_x ? x_dtype : y_dtype;
  const ElementwisePath path =
      elementwise_path(true, {{v, dv}, {dy, dy_dtype}, {dx, dx_dtype}});
  switch (op) {
#define MIXPREC_CUDA_UNARY_BACKWARD(o, ...)                                          \
  case UnaryOp::o:                                                                   \
    unary_backward_kernel<math::o><<<map_grid(n, path), kThreads, 0, stream()>>>(   \
        n, path, v, dv, dy, dy_dtype, dx, dx_dtype);                                 \
    break;
    MIXPREC_UNARY_OPS(MIXPREC_CUDA_UNARY_BACKWARD)
#undef MIXPREC_CUDA_UNARY_BACKWARD
  }
  check_launch("unary_backward");
}

void fill(void* out, DType dtype, std::int64_t n, float value) {
  MIXPREC_CHECK(n >= 0, ShapeError, "fill", "negative element count " << n);
  if (n == 0) return;
  const ElementwisePath path = elementwise_path(true, {{out, dtype}});
  fill_kernel<<<map_grid(n, path), kThreads, 0, stream()>>>(n, path, out, dtype, value);
  check_launch("fill");
}

}  // namespace mixprec::kernels::cuda
