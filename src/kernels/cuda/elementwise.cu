// The CUDA elementwise kernels: the reference's per-element math (kernels::math in
// elementwise_math.h, the same structs the reference loops over) in a grid-stride loop, one
// thread per output element. Values are widened to f32 and rounded once (RNE) to the output
// dtype by the host's own conversion functions (core/half.h, constexpr); nvcc builds with
// --fmad=false, so a*b+c is two roundings here as in the reference, and every op whose list row
// says simd 0 gives the reference's bits. Transcendentals use CUDA's libdevice (within the op
// list's bounds). Deterministic: each element is one thread's, no reductions.
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/elementwise.h"
#include "kernels/spec/elementwise_math.h"

namespace mixprec::kernels::cuda {
namespace {

template <class Op>
__global__ void unary_kernel(Layout l, std::int64_t n, const void* in, DType din, void* out,
                             DType dout) {
  MIXPREC_GRID_STRIDE(i, n) store(out, dout, i, Op::forward(load(in, din, offset(l, 0, i))));
}

template <class Op>
__global__ void binary_kernel(Layout l, std::int64_t n, const void* a, DType da, const void* b,
                              DType db, void* out, DType dout) {
  MIXPREC_GRID_STRIDE(i, n) {
    store(out, dout, i, Op::apply(load(a, da, offset(l, 0, i)), load(b, db, offset(l, 1, i))));
  }
}

template <class Op>
__global__ void unary_backward_kernel(std::int64_t n, const void* v, DType dv, const void* dy,
                                      DType dg, void* dx, DType dout) {
  MIXPREC_GRID_STRIDE(i, n) store(dx, dout, i, Op::backward(load(v, dv, i), load(dy, dg, i)));
}

__global__ void affine_kernel(std::int64_t n, const void* in, DType din, void* out, DType dout,
                              float alpha, float beta) {
  MIXPREC_GRID_STRIDE(i, n) store(out, dout, i, alpha * load(in, din, i) + beta);
}

__global__ void fill_kernel(std::int64_t n, void* out, DType dt, float value) {
  MIXPREC_GRID_STRIDE(i, n) store(out, dt, i, value);
}

}  // namespace

void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype) {
  const Layout l = layout(name(op), shape, in.strides, in.strides);
  const std::int64_t n = numel(l);
  if (n == 0) return;
  switch (op) {
#define MIXPREC_CUDA_UNARY(o, ...)                                                     \
  case UnaryOp::o:                                                                     \
    unary_kernel<math::o><<<grid(n), kThreads, 0, stream()>>>(l, n, in.data, in.dtype, out, out_dtype); \
    break;
    MIXPREC_UNARY_OPS(MIXPREC_CUDA_UNARY)
#undef MIXPREC_CUDA_UNARY
  }
  check_launch(name(op));
}

void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype) {
  const Layout l = layout(name(op), shape, a.strides, b.strides);
  const std::int64_t n = numel(l);
  if (n == 0) return;
  switch (op) {
#define MIXPREC_CUDA_BINARY(o, ...)                                                          \
  case BinaryOp::o:                                                                          \
    binary_kernel<math::o><<<grid(n), kThreads, 0, stream()>>>(l, n, a.data, a.dtype, b.data, b.dtype, out,  \
                                             out_dtype);                                     \
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
  affine_kernel<<<grid(n), kThreads, 0, stream()>>>(n, in, in_dtype, out, out_dtype, alpha, beta);
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
  switch (op) {
#define MIXPREC_CUDA_UNARY_BACKWARD(o, ...)                                                    \
  case UnaryOp::o:                                                                             \
    unary_backward_kernel<math::o><<<grid(n), kThreads, 0, stream()>>>(n, v, dv, dy, dy_dtype, dx, dx_dtype);  \
    break;
    MIXPREC_UNARY_OPS(MIXPREC_CUDA_UNARY_BACKWARD)
#undef MIXPREC_CUDA_UNARY_BACKWARD
  }
  check_launch("unary_backward");
}

void fill(void* out, DType dtype, std::int64_t n, float value) {
  MIXPREC_CHECK(n >= 0, ShapeError, "fill", "negative element count " << n);
  if (n == 0) return;
  fill_kernel<<<grid(n), kThreads, 0, stream()>>>(n, out, dtype, value);
  check_launch("fill");
}

}  // namespace mixprec::kernels::cuda
