// The "cpu" backend: Highway vector kernels with run-time SIMD dispatch, oneDNN for matmul and
// convolution. It fills the entries it implements, in table order (designated initializers);
// the rest, and the calls its kernels do not take (supports), run on the reference: the one
// fallback of kernels::EntryPoint, logged by MIXPREC_VERBOSE.
#include "kernels/backend.h"

namespace mixprec::kernels {
namespace {

/// The kernels that compute in their dtypes, and so take no storage-only (fp8) one: no vector
/// kernel computes in fp8, so those calls run the reference, which refuses them with the op's
/// name (DTypeError). Copies, conversions and the rest move fp8 bytes themselves.
bool cpu_supports(std::size_t entry, std::span<const DType> dtypes) {
  switch (entry) {
    case entry_index("unary"): case entry_index("binary"): case entry_index("affine"): case entry_index("unary_backward"):
    case entry_index("fill"): case entry_index("reduce"): case entry_index("softmax"): case entry_index("softmax_backward"):
    case entry_index("cross_entropy"): case entry_index("cross_entropy_backward"): case entry_index("cross_entropy_fused"):
    case entry_index("rescale_unless_equal"): case entry_index("ema_update"):
    case entry_index("embedding_backward"): case entry_index("masked_fill"): case entry_index("where"):
    case entry_index("cumsum"):
      return computes_in(dtypes);
    default:
      return true;
  }
}

}  // namespace

const Backend& cpu_backend() {
  static const Backend b{
    .name = "cpu",
    .supports = &cpu_supports,
    .fallback = &ref_backend,
    .unary = &cpu::unary,
    .binary = &cpu::binary,
    .affine = &cpu::affine,
    .unary_backward = &cpu::unary_backward,
    .fill = &cpu::fill,
    .copy = &cpu::copy,
    .convert = &cpu::convert,
    .convert_stochastic = &cpu::convert_stochastic,
    .reduce = &cpu::reduce,
    .reduce_batch = &cpu::reduce_batch,
    .softmax = &cpu::softmax,
    .softmax_backward = &cpu::softmax_backward,
    .cross_entropy = &cpu::cross_entropy,
    .cross_entropy_backward = &cpu::cross_entropy_backward,
    .cross_entropy_fused = &cpu::cross_entropy_fused,
    .rescale_unless_equal = &cpu::rescale_unless_equal,
    .batch_norm_forward = &cpu::batch_norm_forward,
    .batch_norm_backward = &cpu::batch_norm_backward,
    .batch_norm_stats = &cpu::batch_norm_stats,
    .batch_norm_backward_reduce = &cpu::batch_norm_backward_reduce,
    .batch_norm_backward_elemt = &cpu::batch_norm_backward_elemt,
    .layer_norm_forward = &cpu::layer_norm_forward,
    .add_layer_norm_forward = &cpu::add_layer_norm_forward,
    .layer_norm_backward = &cpu::layer_norm_backward,
    .batch_norm_relu_max_pool2d = &cpu::batch_norm_relu_max_pool2d,
    .batch_norm_relu_max_pool2d_backward = &cpu::batch_norm_relu_max_pool2d_backward,
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
    .matmul_aux = &cpu::matmul_aux,
    .matmul_post_op_backward = &cpu::matmul_post_op_backward,
    .sgd_update = &cpu::sgd_update,
    .adam_update = &cpu::adam_update,
    .sgd_update_batch = &cpu::sgd_update_batch,
    .adam_update_batch = &cpu::adam_update_batch,
    .ema_update = &cpu::ema_update,
    .unscale = &cpu::unscale,
    .unscale_batch = &cpu::unscale_batch,
    .attention_forward = &cpu::attention_forward,
    .attention_backward = &cpu::attention_backward,
    .embedding = &cpu::embedding,
    .embedding_backward = &cpu::embedding_backward,
    .masked_fill = &cpu::masked_fill,
    .where = &cpu::where,
    .random_bits = &cpu::random_bits,
    .random_uniform = &cpu::random_uniform,
    .cumsum = &cpu::cumsum,
    .fp8_scaled_cast = &cpu::fp8_scaled_cast,
    .fp8_scaled_cast_transpose = &cpu::fp8_scaled_cast_transpose,
    // fp8_scale_update: one short history per tensor and step; the reference loop is the kernel.
    .fp8_gemm = &cpu::fp8_gemm,
    // indices_from_values: a check and a cast per token; the reference loop is the kernel.
  };
  return b;
}

}  // namespace mixprec::kernels
