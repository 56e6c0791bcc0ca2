// The "cpu" backend: Highway vector kernels with run-time SIMD dispatch, oneDNN for matmul and
// convolution.
#include "kernels/backend.h"

namespace mixprec::kernels {

const Backend& cpu_backend() {
  static const Backend b{
    "cpu",
    &cpu::unary,
    &cpu::binary,
    &cpu::affine,
    &cpu::unary_backward,
    &cpu::fill,
    &cpu::copy,
    &cpu::convert,
    &cpu::convert_stochastic,
    &cpu::reduce,
    &cpu::softmax,
    &cpu::softmax_backward,
    &cpu::cross_entropy,
    &cpu::cross_entropy_backward,
    &cpu::batch_norm_forward,
    &cpu::batch_norm_backward,
    &cpu::layer_norm_forward,
    &cpu::layer_norm_backward,
    &cpu::conv2d,
    &cpu::conv2d_backward_data,
    &cpu::conv2d_backward_weights,
    &cpu::max_pool2d,
    &cpu::max_pool2d_backward,
    &cpu::avg_pool2d,
    &cpu::avg_pool2d_backward,
    &cpu::global_avg_pool2d,
    &cpu::global_avg_pool2d_backward,
    &cpu::matmul,
    &cpu::sgd_update,
    &cpu::adam_update,
    &cpu::ema_update,
    &cpu::unscale,
    // attention.h
    &cpu::attention_forward,
    &cpu::attention_backward,
    // embedding.h (transformer ops: embedding lookup)
    &cpu::embedding,
    &cpu::embedding_backward,
    &ref::indices_from_values,  // a check and a cast per token: the reference loop is the kernel
    // masked_fill.h (transformer ops: attention masks)
    &cpu::masked_fill,
    &cpu::where,
    // norm.h (batch norm split into reductions and element-wise passes)
    &cpu::batch_norm_stats,
    &cpu::batch_norm_backward_reduce,
    &cpu::batch_norm_backward_elemt,
    // random.h (Philox streams)
    &cpu::random_bits,
    &cpu::random_uniform,
    // scan.h (running sums)
    &cpu::cumsum,
  };
  return b;
}

}  // namespace mixprec::kernels
