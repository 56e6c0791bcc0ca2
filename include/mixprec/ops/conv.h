#pragma once
/// Differentiable 2-D convolution and pooling on NCHW tensors (any strides: inputs are made
/// contiguous first). Sums accumulate in f32 whatever the dtype; outputs keep the input dtype.
#include <cstdint>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

/// x [N, C, H, W] * weight [O, C, kh, kw] (+ bias [O]) -> [N, O, Ho, Wo] with
/// Ho = (H + 2*padding - kh) / stride + 1 (likewise Wo), zero padding, no dilation or groups.
/// Outside autocast x and weight must share a dtype (DTypeError otherwise); the bias, if given,
/// has that dtype or f32 (an f32 bias is added before the single rounding of the output).
/// Under runtime::Autocast x and weight are cast to the region's dtype (OpKind::conv2d) and the bias
/// is left as it is (cast to f32 only if it is a third dtype). f32 accumulation throughout; the
/// gradients of x, weight and bias come back in their dtypes. Throws ShapeError for wrong ranks,
/// a channel mismatch or a kernel larger than the padded input, ValueError for stride <= 0 or
/// negative padding.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::int64_t stride = 1, std::int64_t padding = 0);

/// Max over kernel x kernel windows of x [N, C, H, W] -> [N, C, Ho, Wo]; stride 0 means
/// stride = kernel; padding (at most kernel / 2) never wins. NaN propagates (a window holding a
/// NaN gives NaN). The gradient goes to each window's first maximum (row-major order), or to its
/// first NaN. Any dtype, exact (OpKind::max_pool2d: pass-through under autocast).
Tensor max_pool2d(const Tensor& x, std::int64_t kernel, std::int64_t stride = 0,
                  std::int64_t padding = 0);

/// Mean over kernel x kernel windows of x [N, C, H, W] -> [N, C, Ho, Wo]; stride 0 means
/// stride = kernel. Padding (at most kernel / 2) is excluded from the count, i.e. PyTorch's
/// count_include_pad=False: a border window averages only its real elements. Sums in f32,
/// output in x's dtype (OpKind::avg_pool2d: pass-through under autocast).
Tensor avg_pool2d(const Tensor& x, std::int64_t kernel, std::int64_t stride = 0,
                  std::int64_t padding = 0);

/// Mean over the spatial axes: x [N, C, H, W] -> [N, C] (H and W must be positive). Sums in
/// f32, output in x's dtype (OpKind::avg_pool2d).
Tensor global_avg_pool2d(const Tensor& x);

}  // namespace mixprec
