#pragma once
/// The one list of kernels, in table order: the families' lists (MIXPREC_<FAMILY>_KERNELS at
/// the end of each family header) one after another. Generated from it: the fields of
/// kernels::Backend (backend.h), the Entry enum, the entry points' instantiations
/// (backend.cpp), the ref and devsim tables, and the tests that every built-in table fills
/// every entry (or falls back for it) and that every entry has a conformance case. The cpu
/// table is written out (designated initializers) because it fills only what it implements.
///
/// A new kernel: its ref:: declaration (the spec and the one written signature) and its name
/// in its family's list; its reference implementation; a conformance case named after it; and
/// in each other backend either its implementation or nothing (the reference runs, logged).
/// Include after the family headers (backend.h does).
#define MIXPREC_KERNEL_ENTRIES(X)                                                           \
  MIXPREC_ELEMENTWISE_KERNELS(X) MIXPREC_COPY_KERNELS(X) MIXPREC_CONVERT_KERNELS(X)             \
  MIXPREC_REDUCE_KERNELS(X) MIXPREC_SOFTMAX_KERNELS(X) MIXPREC_NORM_KERNELS(X)                  \
  MIXPREC_CONV_KERNELS(X) MIXPREC_MATMUL_KERNELS(X) MIXPREC_OPTIM_KERNELS(X)                    \
  MIXPREC_EMA_KERNELS(X) MIXPREC_UNSCALE_KERNELS(X) MIXPREC_ATTENTION_KERNELS(X)                \
  MIXPREC_EMBEDDING_KERNELS(X) MIXPREC_MASKED_FILL_KERNELS(X) MIXPREC_RANDOM_KERNELS(X)         \
  MIXPREC_SCAN_KERNELS(X) MIXPREC_FP8_SCALE_KERNELS(X) MIXPREC_FP8_GEMM_KERNELS(X)
