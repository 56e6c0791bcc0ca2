#pragma once
/// The one list of backend entries, in table order. Generated from it: the fields of
/// kernels::Backend (backend.h), the ref and devsim tables, and the test that every built-in
/// table fills every entry and that every entry has a conformance case. The cpu table is written
/// out (designated initializers) because it names a different namespace per entry.
///
/// A new kernel: one X(name) line here, its ref:: function (the spec) and kernels:: entry point
/// declared in its family header, the entry point's forwarder in backend.cpp, a line in the cpu
/// table, and a conformance case named after it.
#define MIXPREC_KERNEL_ENTRIES(X) \
  /* elementwise.h */ X(unary) X(binary) X(affine) X(unary_backward) X(fill) \
  /* copy.h, convert.h */ X(copy) X(convert) X(convert_stochastic) \
  /* reduce.h */ X(reduce) \
  /* softmax.h */ X(softmax) X(softmax_backward) X(cross_entropy) X(cross_entropy_backward) \
  /* norm.h */ X(batch_norm_forward) X(batch_norm_backward) X(layer_norm_forward) X(layer_norm_backward) \
  /* conv.h: convolution and pooling */ X(conv2d) X(conv2d_backward_data) X(conv2d_backward_weights) X(max_pool2d) X(max_pool2d_backward) X(avg_pool2d) X(avg_pool2d_backward) X(global_avg_pool2d) X(global_avg_pool2d_backward) \
  /* matmul.h */ X(matmul) \
  /* optim.h, ema.h */ X(sgd_update) X(adam_update) X(ema_update) \
  /* unscale.h */ X(unscale) \
  /* attention.h */ X(attention_forward) X(attention_backward) \
  /* embedding.h */ X(embedding) X(embedding_backward) X(indices_from_values) \
  /* masked_fill.h */ X(masked_fill) X(where) \
  /* norm.h: batch norm split for dist::sync_batch_norm */ X(batch_norm_stats) X(batch_norm_backward_reduce) X(batch_norm_backward_elemt) \
  /* random.h */ X(random_bits) X(random_uniform) \
  /* scan.h */ X(cumsum)
