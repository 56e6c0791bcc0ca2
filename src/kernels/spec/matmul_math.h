#pragma once
/// The per-element tail of matmul, written once: the reference (ref/matmul_ref.cpp) applies it
/// to each dot product, and the cuda backend's finishing kernel (cuda/matmul_cublaslt.cu) to
/// cuBLASLt's f32 product wherever an epilogue of cuBLASLt's cannot compute it. The order is
/// the spec's: bias, then the post-op, then C's old value, so with accumulate the relu sees
/// only the product and the bias (C + relu(AB + bias), not relu(AB + bias + C)).
/// The gelu_tanh post-op and its backward form round where kernels/matmul.h says: the two
/// functions below are that order, with the rounding to c_dtype a backend's own (`round`).
#include "kernels/spec/elementwise_math.h"
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

/// The gelu_tanh post-op's two values from the f32 sum: the pre-activation as stored (aux) and
/// C's value before its rounding.
struct MatmulGelu {
  float pre;
  float out;
};
/// pre = round(acc [+ bias]), out = gelu_tanh(pre): GELU of the value the backward reads back.
template <class Round>
MIXPREC_HD inline MatmulGelu matmul_gelu_epilogue(float acc, bool has_bias, float bias,
                                                  Round round) {
  const float pre = round(has_bias ? acc + bias : acc);
  return {pre, gelu_tanh::forward(pre)};
}
/// The backward form's value of C before its rounding: gelu_tanh'(aux) round(acc), acc the f32
/// sum of the GEMM computing the post-op's output gradient, aux the stored pre-activation.
template <class Round>
MIXPREC_HD inline float matmul_gelu_backward_epilogue(float acc, float aux, Round round) {
  return gelu_tanh::backward(aux, round(acc));
}

}  // namespace mixprec::kernels::math
