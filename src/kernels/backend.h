#pragma once
/// The backend boundary: every kernel the ops, optimizers and the scaler reach, as one table of
/// function pointers. Two backends fill it:
///   - "cpu": Highway vector kernels (one source, every SIMD target, run-time dispatch) and
///     oneDNN for matmul and convolution;
///   - "ref": the scalar reference loops, the specification every other backend is tested against.
/// MIXPREC_BACKEND=ref (or set_backend()) runs everything on the reference. A new backend (CUDA,
/// say) is one more table: see docs/ARCHITECTURE.md, "Adding a backend". Nothing in ops/, nn/,
/// amp/, optim/ or train/ names a backend; they call the kernels:: entry points of the family
/// headers (elementwise.h, reduce.h, ...), which forward to backend().
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/convert.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/ema.h"
#include "kernels/embedding.h"
#include "kernels/masked_fill.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/random.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"
#include "kernels/scan.h"
#include "kernels/softmax.h"
#include "kernels/unscale.h"

namespace mixprec::kernels {

/// One backend: a name and one function per kernel. Each entry has exactly the signature and
/// contract of the kernels:: function of the same name (see the family headers). Tables are
/// filled with designated initializers (.unary = &cpu::unary), so two entries of the same
/// signature cannot be swapped by position.
struct Backend {
  const char* name;
  // elementwise.h
  decltype(&ref::unary) unary;
  decltype(&ref::binary) binary;
  decltype(&ref::affine) affine;
  decltype(&ref::unary_backward) unary_backward;
  decltype(&ref::fill) fill;
  // copy.h, convert.h
  decltype(&ref::copy) copy;
  decltype(&ref::convert) convert;
  decltype(&ref::convert_stochastic) convert_stochastic;
  // reduce.h
  decltype(&ref::reduce) reduce;
  // softmax.h
  decltype(&ref::softmax) softmax;
  decltype(&ref::softmax_backward) softmax_backward;
  decltype(&ref::cross_entropy) cross_entropy;
  decltype(&ref::cross_entropy_backward) cross_entropy_backward;
  // norm.h
  decltype(&ref::batch_norm_forward) batch_norm_forward;
  decltype(&ref::batch_norm_backward) batch_norm_backward;
  decltype(&ref::layer_norm_forward) layer_norm_forward;
  decltype(&ref::layer_norm_backward) layer_norm_backward;
  // conv.h: convolution and pooling
  decltype(&ref::conv2d) conv2d;
  decltype(&ref::conv2d_backward_data) conv2d_backward_data;
  decltype(&ref::conv2d_backward_weights) conv2d_backward_weights;
  decltype(&ref::max_pool2d) max_pool2d;
  decltype(&ref::max_pool2d_backward) max_pool2d_backward;
  decltype(&ref::avg_pool2d) avg_pool2d;
  decltype(&ref::avg_pool2d_backward) avg_pool2d_backward;
  decltype(&ref::global_avg_pool2d) global_avg_pool2d;
  decltype(&ref::global_avg_pool2d_backward) global_avg_pool2d_backward;
  // matmul.h
  decltype(&ref::matmul) matmul;
  // optim.h
  decltype(&ref::sgd_update) sgd_update;
  decltype(&ref::adam_update) adam_update;
  decltype(&ref::ema_update) ema_update;
  // unscale.h
  decltype(&ref::unscale) unscale;
  // attention.h: scaled dot-product attention
  decltype(&ref::attention_forward) attention_forward;
  decltype(&ref::attention_backward) attention_backward;
  // embedding.h (transformer ops: embedding lookup)
  decltype(&ref::embedding) embedding;
  decltype(&ref::embedding_backward) embedding_backward;
  decltype(&ref::indices_from_values) indices_from_values;
  // masked_fill.h (transformer ops: attention masks)
  decltype(&ref::masked_fill) masked_fill;
  decltype(&ref::where) where;
  // norm.h (batch norm split into reductions and element-wise passes: dist::sync_batch_norm)
  decltype(&ref::batch_norm_stats) batch_norm_stats;
  decltype(&ref::batch_norm_backward_reduce) batch_norm_backward_reduce;
  decltype(&ref::batch_norm_backward_elemt) batch_norm_backward_elemt;
  // random.h (Philox streams: random bits, uniform tensors, dropout masks)
  decltype(&ref::random_bits) random_bits;
  decltype(&ref::random_uniform) random_uniform;
  // scan.h (running sums: cumsum, its backward, index ramps)
  decltype(&ref::cumsum) cumsum;
};

/// The backend kernels run on now: MIXPREC_BACKEND (cpu|ref|devsim; default cpu) or set_backend().
const Backend& backend();
/// The built-in backends: cpu, ref, and devsim (the reference on simulated device memory; see
/// mixprec/core/device.h).
const Backend& cpu_backend();
const Backend& ref_backend();
const Backend& devsim_backend();
/// The kernels for host memory under the active backend: the active one when its device is the
/// host (cpu, ref), the reference for devsim (whose kernels are the reference, so the bits agree).
/// What the public conversions of raw host arrays (mixprec/core/convert.h) and the data loaders
/// run.
const Backend& host_backend();
/// Selects the backend by name for this process and makes its device current (devsim:0 for
/// devsim, else cpu); returns the previous one's name. An unknown name throws ValueError naming
/// the known ones. Tensors already allocated stay where they are.
std::string set_backend(const std::string& name);
/// What MIXPREC_BACKEND asked for, if it named no backend (the warning printed once), else empty.
std::string backend_env_warning();

}  // namespace mixprec::kernels
