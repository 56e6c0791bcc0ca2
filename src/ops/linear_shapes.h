#pragma once
// Private: the shape contract of a Linear (x [..., in], weight [out, in], bias [out]), checked
// once for linear() and fp8_linear().
#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::ops::detail {

/// ShapeError naming op unless weight is 2-D [out, in], x's last dimension is in, and bias
/// (when defined) is [out].
inline void check_linear_shapes(const char* op, const Tensor& x, const Tensor& weight,
                                const Tensor& bias) {
  MIXPREC_CHECK(weight.dim() == 2, ShapeError, op,
                "weight must be 2-D [out, in], got " << to_string(weight.shape()));
  MIXPREC_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), ShapeError, op,
                "input " << to_string(x.shape()) << " does not match weight "
                         << to_string(weight.shape()) << ": the last input dimension must be "
                         << weight.size(1));
  MIXPREC_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), ShapeError,
                op, "bias must have shape [" << weight.size(0) << "], got "
                                             << (bias.defined() ? to_string(bias.shape()) : ""));
}

}  // namespace mixprec::ops::detail
