// The "ref" backend: the scalar reference loops, the specification of every kernel.
#include "kernels/backend.h"

namespace mixprec::kernels {

const Backend& ref_backend() {
  static const Backend b{
    "ref",
    &ref::unary,
    &ref::binary,
    &ref::affine,
    &ref::unary_backward,
    &ref::fill,
    &ref::copy,
    &ref::convert,
    &ref::convert_stochastic,
    &ref::reduce,
    &ref::softmax,
    &ref::softmax_backward,
    &ref::cross_entropy,
    &ref::cross_entropy_backward,
    &ref::batch_norm_forward,
    &ref::batch_norm_backward,
    &ref::layer_norm_forward,
    &ref::layer_norm_backward,
    &ref::conv2d,
    &ref::conv2d_backward_data,
    &ref::conv2d_backward_weights,
    &ref::max_pool2d,
    &ref::max_pool2d_backward,
    &ref::avg_pool2d,
    &ref::avg_pool2d_backward,
    &ref::global_avg_pool2d,
    &ref::global_avg_pool2d_backward,
    &ref::matmul,
    &ref::sgd_update,
    &ref::adam_update,
    &ref::ema_update,
    &ref::unscale,
    // attention.h
    &ref::attention_forward,
    &ref::attention_backward,
    // embedding.h (transformer ops: embedding lookup)
    &ref::embedding,
    &ref::embedding_backward,
    &ref::indices_from_values,
    // masked_fill.h (transformer ops: attention masks)
    &ref::masked_fill,
    &ref::where,
    // norm.h (batch norm split into reductions and element-wise passes)
    &ref::batch_norm_stats,
    &ref::batch_norm_backward_reduce,
    &ref::batch_norm_backward_elemt,
    // random.h (Philox streams)
    &ref::random_bits,
    &ref::random_uniform,
    // scan.h (running sums)
    &ref::cumsum,
  };
  return b;
}

}  // namespace mixprec::kernels
