// The fp8 Linear of the training recipes (mixprec/ops/fp8_linear.h). Each operand is quantised
// by the saturating scaled cast (kernels/fp8_scale.h), which also measures its amax, and its
// scale is updated by the device kernel: no host read anywhere. The GEMMs are the fp8 GEMM kernel
// (kernels/fp8_gemm.h): the quantised operands and their scales go in, each operand stands for
// decode(q) / scale exactly, products are exact and accumulated in f32. On a GPU with fp8
// Tensor Cores that is cuBLASLt's fp8 GEMM; on a CPU its exact emulation: the products are the
// same, only the summation order differs. The kernel reads both operands k-contiguous, so the
// backward GEMMs take transposed copies of the quantised bytes, which the casts write in the same
// pass as the row-major ones (fp8_scaled_cast_transpose: no second pass over the bytes).
#include "mixprec/ops/fp8_linear.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/fp8_gemm.h"
#include "kernels/fp8_scale.h"
#include "kernels/reduce.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/function.h"
#include "mixprec/runtime/node.h"
#include "ops/linear_shapes.h"
#include "runtime/op_scope.h"

namespace mixprec {
namespace {

constexpr const char* kOp = "fp8_linear";

Fp8TensorState make_role_state(std::int64_t history) {
  return {Tensor::zeros({history}), Tensor::full({1}, 1.0f), Tensor::zeros({1}), Tensor::zeros({3})};
}

/// Which copies of a quantised [r, c] operand a cast writes: its bytes row-major (q), their
/// [c, r] transpose (qt, k-contiguous for a GEMM that contracts over r), or both.
enum class Copies { row_major, transposed, both };

/// A quantised operand: the fp8 tensors asked for (q, qt; the other undefined) and the scale
/// they were cast with (a copy: delayed scaling updates the state's scale right after the cast,
/// and backward needs the one used).
struct Quantized {
  Tensor q;
  Tensor qt;
  Tensor scale;
};

/// The observation of one cast (Fp8TensorState::observed), counted on the host from the input t,
/// its fp8 result q and the scale it was cast with: saturated when |t * scale| > the format's
/// max (before the clip), flushed when t was nonzero and q is zero. Written into `observed` on
/// its device by three one-element fills (no upload).
void observe_cast(const Tensor& t, const Tensor& q, const Tensor& scale, DType fmt,
                  const Tensor& observed) {
  const TransferReason why("fp8 cast statistics");
  const std::vector<float> x = t.to_vector();
  const std::vector<float> y = q.to_vector();
  const double s = scale.item();
  const double max = traits(fmt).max;
  std::int64_t saturated = 0, nonzero = 0, flushed = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    if (std::isnan(v) || v == 0.0) continue;
    ++nonzero;
    if (std::fabs(v * s) > max) {
      ++saturated;
    } else if (y[i] == 0.0f) {
      ++flushed;
    }
  }
  const double n = static_cast<double>(x.size());
  auto* o = static_cast<float*>(observed.data_ptr());
  kernels::fill(o, DType::f32, 1, n > 0 ? static_cast<float>(saturated / n) : 0.0f);
  kernels::fill(o + 1, DType::f32, 1,
                nonzero > 0 ? static_cast<float>(static_cast<double>(flushed) / nonzero) : 0.0f);
  kernels::fill(o + 2, DType::f32, 1, 1.0f);
}

/// Writes the copies asked for of t cast to fmt with the scale at `scale`, and t's amax: one
/// pass over t either way. An observed cast keeps q, which observe_cast counts from.
void cast(const Tensor& t, const float* scale, DType fmt, Copies copies, bool observe,
          Quantized& out, float* amax) {
  if (copies != Copies::transposed || observe) out.q = Tensor::empty(t.shape(), fmt);
  if (copies == Copies::row_major) {
    kernels::fp8_scaled_cast(t.data_ptr(), t.dtype(), out.q.data_ptr(), fmt, t.numel(), scale, amax);
    return;
  }
  const std::int64_t rows = t.size(0), cols = t.size(1);
  out.qt = Tensor::empty({cols, rows}, fmt);
  kernels::fp8_scaled_cast_transpose(t.data_ptr(), t.dtype(), rows, cols,
                                     out.q.defined() ? out.q.data_ptr() : nullptr,
                                     out.qt.data_ptr(), fmt, scale, amax);
}

/// Quantises the contiguous tensor t (f32/bf16/f16; [r, c] unless only row_major is asked for)
/// to fmt with the role's state, as the recipe says, raising found_inf when t's amax is NaN or
/// Inf. Returns the copies asked for (q also when observed).
Quantized quantize(const Tensor& t, Fp8TensorState& s, DType fmt, const runtime::Fp8Recipe& recipe,
                   const Tensor& found_inf, bool observe, Copies copies) {
  const std::int64_t n = t.numel();
  const std::int64_t len = recipe.history_length();
  MIXPREC_CHECK(s.history.numel() == len, ValueError, kOp,
                "the state's amax history has " << s.history.numel() << " entries but the recipe ("
                    << runtime::to_string(recipe) << ") needs " << len);
  Quantized out;
  auto* hist = s.history.data<float>();
  auto* scale = s.scale.data<float>();
  auto* amax = s.amax.data<float>();
  auto* found = found_inf.data<float>();
  if (recipe.scaling == runtime::Fp8Scaling::current) {
    // Two passes: the amax decides the scale this very cast uses.
    kernels::fp8_scaled_cast(t.data_ptr(), t.dtype(), nullptr, fmt, n, nullptr, amax);
    kernels::fp8_scale_update(hist, len, amax, scale, fmt, recipe.margin, found);
    cast(t, scale, fmt, copies, observe, out, amax);
    out.scale = s.scale.clone();
    if (observe) observe_cast(t, out.q, out.scale, fmt, s.observed);
    return out;
  }
  // Delayed: one pass with the scale from earlier steps, then this step's amax enters the history.
  cast(t, scale, fmt, copies, observe, out, amax);
  out.scale = s.scale.clone();
  kernels::fp8_scale_update(hist, len, amax, scale, fmt, recipe.margin, found);
  if (observe) observe_cast(t, out.q, out.scale, fmt, s.observed);
  return out;
}

/// C [m, n] = A Bᵀ (+ bias [n]) for quantised A [m, k] and B [n, k] (both k-contiguous), each
/// operand standing for decode(q) / scale, in f32 accumulation, C of c_dtype rounded once (the
/// bias, if defined, added to the f32 sums first): one fp8 GEMM. fast_accum is the forward's (a
/// GPU's reduced-precision partial sums; the CPU ignores it).
Tensor fp8_mm(const Tensor& a, const Tensor& a_scale, const Tensor& b, const Tensor& b_scale,
              DType c_dtype, bool fast_accum, const Tensor& bias = Tensor()) {
  kernels::Fp8GemmDesc d;
  d.m = a.size(0), d.n = b.size(0), d.k = a.size(1);
  d.a_dtype = a.dtype(), d.b_dtype = b.dtype(), d.c_dtype = c_dtype;
  d.fast_accum = fast_accum;
  Tensor bias_c;
  if (bias.defined()) {
    bias_c = bias.detach().contiguous();
    d.has_bias = true;
    d.bias_dtype = bias_c.dtype();
  }
  Tensor c = Tensor::empty({d.m, d.n}, c_dtype);
  kernels::fp8_gemm(d, a.data_ptr(), a_scale.data<float>(), b.data_ptr(), b_scale.data<float>(),
                    d.has_bias ? bias_c.data_ptr() : nullptr, c.data_ptr());
  // For the profile: 2*M*N*K (plus the bias adds); bytes: the 1-byte operands read, C written.
  runtime::detail::add_work(
      2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k) +
          (d.has_bias ? static_cast<double>(d.m * d.n) : 0.0),
      static_cast<double>(d.m * d.k + d.n * d.k + d.m * d.n * static_cast<std::int64_t>(size_of(c_dtype))));
  return c;
}

/// Indices of the tensors fp8_linear saves for backward: the quantised input and weight
/// transposed (xqᵀ [K, M], wqᵀ [K, N]), the k-contiguous operands dw and dx read.
enum Saved : std::size_t { kXqT, kXScale, kWqT, kWScale, kGHistory, kGScale, kGAmax, kGObserved, kFoundInf };

std::vector<Tensor> fp8_linear_backward(runtime::FunctionContext& ctx, const Tensor& dy_arg) {
  const std::vector<Tensor>& saved = ctx.saved_tensors();
  runtime::Fp8Recipe recipe;
  recipe.scaling = static_cast<runtime::Fp8Scaling>(static_cast<int>(ctx.scalar("scaling")));
  recipe.amax_history = static_cast<std::int64_t>(ctx.scalar("history"));
  recipe.margin = static_cast<int>(ctx.scalar("margin"));
  recipe.formats = static_cast<runtime::Fp8Formats>(static_cast<int>(ctx.scalar("formats")));
  Fp8TensorState grad{saved[kGHistory], saved[kGScale], saved[kGAmax], saved[kGObserved]};
  const bool observe = ctx.scalar("observe") != 0.0;
  // The gradients are f32 whatever autocast state the forward had.
  runtime::Autocast off(false, runtime::autocast_dtype());
  const Tensor& xqt = saved[kXqT];  // [K, M]
  const Tensor& wqt = saved[kWqT];  // [K, N]
  const std::int64_t m = xqt.size(1), out = wqt.size(1);
  const Tensor dy = dy_arg.contiguous().reshape({m, out});
  const std::vector<bool>& needs = ctx.needs_input_grad();
  // dx reads dy's bytes row-major, dw their transpose: one cast writes what is needed.
  const Copies copies = needs[0] && needs[1] ? Copies::both
                        : needs[1]           ? Copies::transposed
                                             : Copies::row_major;
  Quantized g = quantize(dy, grad, recipe.grad_format(), recipe, saved[kFoundInf], observe, copies);
  Tensor dx, dw, db;
  // dw first, then dyᵀ is dropped: dx's result is allocated without it beside.
  if (needs[1]) {  // dw [N, K] = dyᵀ [N, M] · x [M, K]
    dw = fp8_mm(g.qt, g.scale, xqt, saved[kXScale], DType::f32, false);
    g.qt = Tensor();
  }
  if (needs[0]) {  // dx [M, K] = dy [M, N] · w [N, K], in x's dtype (rounded once, as a 16-bit
                   // Linear's input gradient: no f32 copy of it)
    const auto x_dtype = static_cast<DType>(static_cast<int>(ctx.scalar("x_dtype")));
    dx = fp8_mm(g.q, g.scale, wqt, saved[kWScale], x_dtype, false);
    Shape x_shape(static_cast<std::size_t>(ctx.scalar("x_dims")));
    for (std::size_t d = 0; d < x_shape.size(); ++d) {
      x_shape[d] = static_cast<std::int64_t>(ctx.scalar("x_size" + std::to_string(d)));
    }
    dx = dx.reshape(x_shape);
  }
  // The bias gradient needs no GEMM: it sums the unquantised gradient's rows with f32
  // accumulation, read in dy's dtype (an f32 copy of dy would be the backward's largest
  // transient), into f32.
  if (needs.size() > 2 && needs[2]) {
    db = Tensor::empty({out}, DType::f32);
    kernels::reduce(kernels::ReduceOp::sum, dy.data_ptr(), dy.dtype(), 1, m, out, db.data_ptr(),
                    DType::f32);
  }
  return {dx, dw, db};
}

}  // namespace

Fp8LinearState::Fp8LinearState(const runtime::Fp8Recipe& r) : recipe(r) {
  recipe.validate();
  const std::int64_t len = recipe.history_length();
  input = make_role_state(len);
  weight = make_role_state(len);
  grad = make_role_state(len);
  found_inf = Tensor::zeros({1});
}

Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  Fp8LinearState& state) {
  MIXPREC_CHECK(x.defined() && weight.defined(), ValueError, kOp, "x and weight must be defined");
  ops::detail::check_linear_shapes(kOp, x, weight, bias);
  require_compute_dtype(kOp, x.dtype());
  require_compute_dtype(kOp, weight.dtype());
  const bool autocast = runtime::autocast_enabled();
  const DType out_dtype = autocast ? runtime::autocast_dtype() : DType::f32;
  // Without a backward to come (evaluation, no_grad) the casts write no transposed copies.
  const bool backward = runtime::needs_grad({&x, &weight, &bias});
  const Copies copies = backward ? Copies::both : Copies::row_major;
  const runtime::CustomFunction fn{
      kOp,
      [&state, out_dtype, copies](runtime::FunctionContext& ctx, const std::vector<Tensor>& in) {
        const Tensor& xin = in[0];
        const std::int64_t k = in[1].size(1);
        const Tensor x2 = xin.contiguous().reshape({xin.numel() / std::max<std::int64_t>(k, 1), k});
        const runtime::Fp8Recipe& r = state.recipe;
        // Each cast writes the row-major bytes this GEMM reads and the transposed ones the
        // backward's read; the row-major ones are dropped as soon as the GEMM is done.
        Quantized qx = quantize(x2, state.input, r.forward_format(), r, state.found_inf,
                                state.observe, copies);
        Quantized qw = quantize(in[1].contiguous(), state.weight, r.forward_format(), r,
                                state.found_inf, state.observe, copies);
        runtime::Autocast off(false, runtime::autocast_dtype());
        // The bias joins the GEMM's f32 sums, and the output is rounded once to its dtype: no
        // f32 product and no f32 sum in between.
        Tensor y = fp8_mm(qx.q, qx.scale, qw.q, qw.scale, out_dtype, /*fast_accum=*/true, in[2]);
        qx.q = Tensor();
        qw.q = Tensor();
        Shape y_shape = xin.shape();
        y_shape.back() = in[1].size(0);
        y = y.reshape(y_shape);
        ctx.save_for_backward({qx.qt, qx.scale, qw.qt, qw.scale, state.grad.history,
                               state.grad.scale, state.grad.amax, state.grad.observed,
                               state.found_inf});
        ctx.save_scalar("observe", state.observe ? 1.0 : 0.0);
        ctx.save_scalar("scaling", static_cast<double>(r.scaling));
        ctx.save_scalar("history", static_cast<double>(r.amax_history));
        ctx.save_scalar("margin", r.margin);
        ctx.save_scalar("formats", static_cast<double>(r.formats));
        ctx.save_scalar("x_dims", static_cast<double>(xin.dim()));
        ctx.save_scalar("x_dtype", static_cast<double>(static_cast<int>(xin.dtype())));
        for (std::int64_t d = 0; d < xin.dim(); ++d) {
          ctx.save_scalar("x_size" + std::to_string(d), static_cast<double>(xin.size(d)));
        }
        return y;
      },
      &fp8_linear_backward};
  return runtime::apply(fn, {x, weight, bias});
}

}  // namespace mixprec
