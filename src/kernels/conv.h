#pragma once
/// 2-D convolution and pooling on raw dense buffers, NCHW or channels-last (NHWC) as the
/// descriptor says (weights always OIHW), forward and backward. Every sum accumulates in f32 and each output is rounded once to its dtype.
/// Convolutions run through oneDNN (f32 directly; bf16 natively or widened to f32, whichever is
/// faster on this CPU; f16 always widened to f32, as oneDNN 2.6 has no f16 CPU convolution),
/// except first layers (few input channels, stride 1), which run a direct kernel of our own.
/// Pooling runs our own loops over planes (NaN-propagating max, any dtype).
/// kernels::ref:: holds plain scalar loops: the spec.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

/// One 2-D convolution: x [n, c, h, w] * weight [o, c, kh, kw] (+ bias [o]) -> y [n, o, ho, wo]
/// with the same stride and zero padding on both spatial axes. x, weight, y (and their
/// gradients) share `dtype`; the bias (and its gradient) is `bias_dtype`, either dtype or f32.
struct Conv2dDesc {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t o = 0, kh = 0, kw = 0;
  std::int64_t stride = 1, padding = 0;
  DType dtype = DType::f32;
  bool has_bias = false;
  DType bias_dtype = DType::f32;
  /// x, y and their gradients are stored channels-last ([n, h, w, c] and [n, ho, wo, o] in
  /// memory) instead of NCHW; the weight and its gradient stay OIHW either way.
  bool channels_last = false;
  /// f32 data on a GPU: products on TF32 Tensor Cores with f32 sums (matmul precision high or
  /// medium, as MatmulDesc::tf32); false keeps true f32 products. The CPU ignores it.
  bool tf32 = false;

  /// Calls f(DType) for dtype and, with a bias, bias_dtype (kernels/dtype_visit.h).
  template <class F>
  void for_each_dtype(F&& f) const {
    f(dtype);
    if (has_bias) f(bias_dtype);
  }

  /// Output height (h + 2 * padding - kh) / stride + 1.
  std::int64_t out_h() const { return (h + 2 * padding - kh) / stride + 1; }
  /// Output width (w + 2 * padding - kw) / stride + 1.
  std::int64_t out_w() const { return (w + 2 * padding - kw) / stride + 1; }
};

/// Throws ShapeError (negative extents, kernel larger than the padded input), ValueError
/// (stride <= 0, negative padding) or DTypeError (bias dtype neither dtype nor f32) naming op.
void validate_conv2d(const char* op, const Conv2dDesc& d);

namespace ref {
/// y = conv(x, weight) + bias. bias may be null when !has_bias.
void conv2d(const Conv2dDesc& d, const void* x, const void* weight, const void* bias, void* y);
/// dx [n, c, h, w] = the gradient of conv w.r.t. x given dy [n, o, ho, wo] (overwrites dx).
void conv2d_backward_data(const Conv2dDesc& d, const void* dy, const void* weight, void* dx);
/// dweight [o, c, kh, kw] (dtype) and, if dbias is not null, dbias [o] (bias_dtype) from x and
/// dy (overwrites both).
void conv2d_backward_weights(const Conv2dDesc& d, const void* x, const void* dy, void* dweight,
                             void* dbias);
}  // namespace ref

/// How bf16 convolutions run. automatic: oneDNN's bf16 kernels when max_isa() >= avx512_bf16
/// or the input has fewer than 16 channels (memory-bound: converting costs more than oneDNN's
/// bf16 emulation on AVX-512F), else inputs widened to f32 (exact) for oneDNN's f32 kernels and
/// the output rounded once to bf16 (oneDNN 2.6 only emulates bf16 without AVX512_BF16: measured
/// ~1.4x slower than widening at 32->64 channels, see bench_conv). Either way products are
/// exact in f32 and sums are f32. native and widen force a route (tests, benchmarks).
enum class ConvBf16Route : std::uint8_t { automatic, native, widen };
/// Sets the bf16 route for the whole process (thread-safe); returns the previous one.
ConvBf16Route set_conv_bf16_route(ConvBf16Route route);

/// Memory layout oneDNN computes in. automatic: whatever measured fastest (see conv.cpp);
/// plain: NCHW/OIHW as stored (no reorders); blocked: oneDNN's choice (format_tag::any) with
/// reorders from and to NCHW around each call. For tests and benchmarks.
enum class ConvLayout : std::uint8_t { automatic, plain, blocked };
/// Sets the layout policy for the whole process (thread-safe); returns the previous one.
ConvLayout set_conv_layout(ConvLayout layout);

/// Whether the forward and weight-gradient passes of stride-1 convolutions with at most 4 input
/// channels (a first layer) run the direct kernel of cpu/conv_direct.h (true, the default) or
/// oneDNN (false; also MIXPREC_CONV=onednn). Thread-safe; returns the previous setting. For
/// tests and benchmarks.
bool set_conv_direct(bool enabled);

/// Number of oneDNN primitives in the convolution cache (bounded LRU); for tests.
std::size_t conv_cache_size();
/// Empties the convolution primitive cache; for tests.
void conv_cache_clear();

/// One 2-D pooling window: x [n, c, h, w] -> y [n, c, ho, wo], square kernel, same stride and
/// padding on both axes; x, y and their gradients share dtype.
struct Pool2dDesc {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t kernel = 1, stride = 1, padding = 0;
  DType dtype = DType::f32;
  /// x, y, their gradients and argmax are stored channels-last ([n, h, w, c] in memory).
  bool channels_last = false;

  /// Calls f(dtype): x, y and their gradients share it (kernels/dtype_visit.h).
  template <class F>
  void for_each_dtype(F&& f) const { f(dtype); }

  std::int64_t out_h() const { return (h + 2 * padding - kernel) / stride + 1; }
  std::int64_t out_w() const { return (w + 2 * padding - kernel) / stride + 1; }
};

/// Throws ValueError (kernel or stride <= 0, padding negative or above kernel / 2, as in
/// PyTorch, so that every window holds at least one input) or ShapeError (negative extents,
/// kernel larger than the padded input) naming op.
void validate_pool2d(const char* op, const Pool2dDesc& d);

namespace ref {
/// y = max over each window; argmax (may be null; laid out as y) receives, per output, the
/// index within its input plane (row * w + col) of the first maximum in row-major window order. A NaN in a
/// window wins (the first NaN), so NaN propagates. Padding never wins.
void max_pool2d(const Pool2dDesc& d, const void* x, void* y, std::int32_t* argmax);
/// dx = dy routed to each output's argmax (summed in f32 where windows overlap); overwrites dx.
void max_pool2d_backward(const Pool2dDesc& d, const void* dy, const std::int32_t* argmax,
                         void* dx);
/// y = mean of each window over its non-padding elements (count_include_pad = false), summed
/// in f32.
void avg_pool2d(const Pool2dDesc& d, const void* x, void* y);
/// dx = each dy spread evenly over its window's non-padding elements; overwrites dx.
void avg_pool2d_backward(const Pool2dDesc& d, const void* dy, void* dx);

/// y [planes] = mean of each plane of x [planes, hw], summed in f32 (global average pooling).
void global_avg_pool2d(const void* x, DType dtype, std::int64_t planes, std::int64_t hw, void* y);
/// dx [planes, hw] = dy [planes] / hw broadcast over each plane.
void global_avg_pool2d_backward(const void* dy, DType dtype, std::int64_t planes,
                                std::int64_t hw, void* dx);
}  // namespace ref

/// The conv kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_CONV_KERNELS(X) X(conv2d) X(conv2d_backward_data) X(conv2d_backward_weights) \
  X(max_pool2d) X(max_pool2d_backward) X(avg_pool2d) X(avg_pool2d_backward) X(global_avg_pool2d) \
  X(global_avg_pool2d_backward)
MIXPREC_CONV_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
