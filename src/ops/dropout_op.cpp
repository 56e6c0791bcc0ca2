// Inverted dropout with a mask drawn from the counter-based RNG (reproducible, thread-independent).
#include "mixprec/core/random.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {

Tensor dropout(const Tensor& x, float p, bool training, std::uint64_t seed) {
  ops::detail::require_defined("dropout", x, "x");
  require_compute_dtype("dropout", x.dtype());
  MIXPREC_CHECK(p >= 0.0f && p < 1.0f, ValueError, "dropout",
                "p must be in [0, 1), got " << p);
  if (!training || p == 0.0f) return x;
  runtime::detail::OpScope prof(runtime::OpKind::dropout);
  // The mask already holds the 1/(1-p) scale, so the op is one multiply and its gradient is
  // the same multiply (mul's own backward).
  // Drawn in tensor memory: u = uniform(seed, i) by the random_uniform kernel, keep = (u >= p)
  // by the ge kernel in place, then scaled by affine straight into x's dtype: the same mask, bit
  // for bit, as the scalar definition mixprec::uniform(seed, i) >= p ? keep_scale : 0, rounded
  // to x's dtype, in two f32 passes and one in x's dtype.
  const float keep_scale = 1.0f / (1.0f - p);
  Tensor keep = Tensor::uniform(x.shape(), seed, 0.0f, 1.0f);
  const Tensor bound = Tensor::full({}, p);
  const std::vector<std::int64_t> strides = keep.strides(), scalar(keep.shape().size(), 0);
  kernels::binary(kernels::BinaryOp::ge, keep.shape(), {keep.data_ptr(), DType::f32, strides},
                  {bound.data_ptr(), DType::f32, scalar}, keep.data_ptr(), DType::f32);
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  kernels::affine(keep.data_ptr(), DType::f32, mask.data_ptr(), mask.dtype(), mask.numel(),
                  keep_scale, 0.0f);
  Tensor y = mul(x, mask);
  prof.done_composite(y);  // the mul reports the work; drawing the mask is this op's own time
  return y;
}

}  // namespace mixprec
