// The "cpu" backend: Highway vector kernels with run-time SIMD dispatch, oneDNN for matmul and
// convolution.
#include "kernels/backend.h"

namespace mixprec::kernels {

const Backend& cpu_backend() {
  static const Backend b{
    .name = "cpu",
    .unary = &cpu::unary,
    .binary = &cpu::binary,
    .affine = &cpu::affine,
    .unary_backward = &cpu::unary_backward,
    .fill = &cpu::fill,
    .copy = &cpu::copy,
    .convert = &cpu::convert,
    .convert_stochastic = &cpu::convert_stochastic,
    .reduce = &cpu::reduce,
    .softmax = &cpu::softmax,
    .softmax_backward = &cpu::softmax_backward,
    .cross_entropy = &cpu::cross_entropy,
    .cross_entropy_backward = &cpu::cross_entropy_backward,
    .batch_norm_forward = &cpu::batch_norm_forward,
    .batch_norm_backward = &cpu::batch_norm_backward,
    .layer_norm_forward = &cpu::layer_norm_forward,
    .layer_norm_backward = &cpu::layer_norm_backward,
    .conv2d = &cpu::conv2d,
    .conv2d_backward_data = &cpu::conv2d_backward_data,
    .conv2d_backward_weights = &cpu::conv2d_backward_weights,
    .max_pool2d = &cpu::max_pool2d,
    .max_pool2d_backward = &cpu::max_pool2d_backward,
    .avg_pool2d = &cpu::avg_pool2d,
    .avg_pool2d_backward = &cpu::avg_pool2d_backward,
    .global_avg_pool2d = &cpu::global_avg_pool2d,
    .global_avg_pool2d_backward = &cpu::global_avg_pool2d_backward,
    .matmul = &cpu::matmul,
    .sgd_update = &cpu::sgd_update,
    .adam_update = &cpu::adam_update,
    .ema_update = &cpu::ema_update,
    .unscale = &cpu::unscale,
    // attention.h
    .attention_forward = &cpu::attention_forward,
    .attention_backward = &cpu::attention_backward,
    // embedding.h (transformer ops: embedding lookup)
    .embedding = &cpu::embedding,
    .embedding_backward = &cpu::embedding_backward,
    .indices_from_values = &ref::indices_from_values,  // a check and a cast per token: the reference loop is the kernel
    // masked_fill.h (transformer ops: attention masks)
    .masked_fill = &cpu::masked_fill,
    .where = &cpu::where,
    // norm.h (batch norm split into reductions and element-wise passes)
    .batch_norm_stats = &cpu::batch_norm_stats,
    .batch_norm_backward_reduce = &cpu::batch_norm_backward_reduce,
    .batch_norm_backward_elemt = &cpu::batch_norm_backward_elemt,
    // random.h (Philox streams)
    .random_bits = &cpu::random_bits,
    .random_uniform = &cpu::random_uniform,
    // scan.h (running sums)
    .cumsum = &cpu::cumsum,
  };
  return b;
}

}  // namespace mixprec::kernels
