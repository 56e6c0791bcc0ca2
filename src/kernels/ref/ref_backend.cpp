// The "ref" backend: the scalar reference loops, the specification of every kernel.
#include "kernels/backend.h"

namespace mixprec::kernels {

const Backend& ref_backend() {
  static const Backend b{
    .name = "ref",
    .unary = &ref::unary,
    .binary = &ref::binary,
    .affine = &ref::affine,
    .unary_backward = &ref::unary_backward,
    .fill = &ref::fill,
    .copy = &ref::copy,
    .convert = &ref::convert,
    .convert_stochastic = &ref::convert_stochastic,
    .reduce = &ref::reduce,
    .softmax = &ref::softmax,
    .softmax_backward = &ref::softmax_backward,
    .cross_entropy = &ref::cross_entropy,
    .cross_entropy_backward = &ref::cross_entropy_backward,
    .batch_norm_forward = &ref::batch_norm_forward,
    .batch_norm_backward = &ref::batch_norm_backward,
    .layer_norm_forward = &ref::layer_norm_forward,
    .layer_norm_backward = &ref::layer_norm_backward,
    .conv2d = &ref::conv2d,
    .conv2d_backward_data = &ref::conv2d_backward_data,
    .conv2d_backward_weights = &ref::conv2d_backward_weights,
    .max_pool2d = &ref::max_pool2d,
    .max_pool2d_backward = &ref::max_pool2d_backward,
    .avg_pool2d = &ref::avg_pool2d,
    .avg_pool2d_backward = &ref::avg_pool2d_backward,
    .global_avg_pool2d = &ref::global_avg_pool2d,
    .global_avg_pool2d_backward = &ref::global_avg_pool2d_backward,
    .matmul = &ref::matmul,
    .sgd_update = &ref::sgd_update,
    .adam_update = &ref::adam_update,
    .ema_update = &ref::ema_update,
    .unscale = &ref::unscale,
    // attention.h
    .attention_forward = &ref::attention_forward,
    .attention_backward = &ref::attention_backward,
    // embedding.h (transformer ops: embedding lookup)
    .embedding = &ref::embedding,
    .embedding_backward = &ref::embedding_backward,
    .indices_from_values = &ref::indices_from_values,
    // masked_fill.h (transformer ops: attention masks)
    .masked_fill = &ref::masked_fill,
    .where = &ref::where,
    // norm.h (batch norm split into reductions and element-wise passes)
    .batch_norm_stats = &ref::batch_norm_stats,
    .batch_norm_backward_reduce = &ref::batch_norm_backward_reduce,
    .batch_norm_backward_elemt = &ref::batch_norm_backward_elemt,
    // random.h (Philox streams)
    .random_bits = &ref::random_bits,
    .random_uniform = &ref::random_uniform,
    // scan.h (running sums)
    .cumsum = &ref::cumsum,
  };
  return b;
}

}  // namespace mixprec::kernels
