#pragma once
/// The per-element tail of matmul, written once: the reference (ref/matmul_ref.cpp) applies it
/// to each dot product, and the cuda backend's finishing kernel (cuda/matmul_cublaslt.cu) to
/// cuBLASLt's f32 product wherever an epilogue of cuBLASLt's cannot compute it. The order is
/// the spec's: bias, then the post-op, then C's old value, so with accumulate the relu sees
/// only the product and the bias (C + relu(AB + bias), not relu(AB + bias + C)).
#include "kernels/spec/host_device.h"

namespace mixprec::kernels::math {

/// C's new value in f32, before its one rounding to c_dtype: [c +] post_op(acc [+ bias]).
/// relu is x < 0 ? 0 : x, so a NaN passes through (like oneDNN's relu and torch.relu).
MIXPREC_HD inline float matmul_epilogue(float acc, bool has_bias, float bias, bool relu,
                                        bool accumulate, float c) {
  if (has_bias) acc += bias;
  if (relu) acc = acc < 0.0f ? 0.0f : acc;
  if (accumulate) acc += c;
  return acc;
}

}  // namespace mixprec::kernels::math
