// The conformance cases of the gelu_tanh post-op (kernels/matmul.h): matmul with it, matmul_aux
// (the pre-activation kept) and matmul_post_op_backward (the derivative and the bias gradient
// fused into the GEMM of the output gradient); conformance_cases.h says how cases run. Shapes
// with n a multiple of 8 (cuBLASLt's epilogues on a GPU) and n odd (their fallback: our
// kernels), m not a multiple of 8, both operand layouts, with and without a bias, and a bias
// or bias gradient in f32 beside the operands' dtype.
//
// The tolerance of the GELU outputs follows the pre-activation's size, not the output's
// (kernels/gelu_epilogue_tolerance.h; docs/cuda.md, "GELU epilogues"):
//   forward:  + (2 eps(dtype) + 2^-11) |H|
//   backward: + (2 eps(dtype) + 2^-7) |D|, D = op(A) op(B); the bias gradient the same on the
//             column sums of |D|, plus m eps(f32) of them for the summation order.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "conformance/conformance_cases.h"
#include "conformance/conformance_util.h"
#include "kernels/backend.h"
#include "kernels/gelu_epilogue_tolerance.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::conformance {
namespace {

using ktest::Buffer;
using ktest::random_buffer;

constexpr double kEpsF32 = 1.1920928955078125e-07;

struct Shape {
  std::int64_t m, n, k;
  bool trans_a, trans_b;
};
// n = 24: cuBLASLt's epilogues take it (the aux leading dimension is a multiple of 8); n = 21:
// they do not, so a GPU runs its fallback. m = 13 and 37 are no multiple of 8 either.
constexpr Shape kShapes[] = {{37, 24, 65, false, true}, {13, 21, 40, false, false},
                             {37, 24, 65, true, false}};

MatmulDesc desc_of(const Shape& s, DType t) {
  MatmulDesc d;
  d.m = s.m, d.n = s.n, d.k = s.k, d.trans_a = s.trans_a, d.trans_b = s.trans_b;
  d.dtype = t, d.c_dtype = t, d.post_op = MatmulPostOp::gelu_tanh;
  return d;
}

/// The f32 summation error of a k-term dot product of values in [-1, 1].
double gemm_atol(const MatmulDesc& d) { return static_cast<double>(d.k) * kEpsF32 * 4; }

/// slack(v_i) per element of a buffer.
template <class Slack>
std::vector<double> per_element(const Buffer& v, Slack&& slack) {
  std::vector<double> out(static_cast<std::size_t>(v.size()));
  for (std::int64_t i = 0; i < v.size(); ++i) out[static_cast<std::size_t>(i)] = slack(v.get(i));
  return out;
}

/// The forward: matmul with the post-op (aux null), or matmul_aux. Outputs: C, and aux when
/// kept. C's tolerance follows the reference's pre-activation (computed here by the reference
/// whatever backend runs, so it is the same numbers on every run).
Outs run_forward(const Backend& b, DType t, const Shape& s, bool keep_aux, bool bias,
                 DType bias_dtype) {
  MatmulDesc d = desc_of(s, t);
  d.has_bias = bias, d.bias_dtype = bias_dtype;
  const Buffer a = random_buffer(t, d.m * d.k, -1.0f, 1.0f, 140);
  const Buffer bb = random_buffer(t, d.k * d.n, -1.0f, 1.0f, 141);
  const Buffer bv = random_buffer(bias_dtype, d.n, -1.0f, 1.0f, 142);
  Buffer c(t, d.m * d.n), aux(t, d.m * d.n), h_ref(t, d.m * d.n), g_ref(t, d.m * d.n);
  if (keep_aux) {
    b.matmul_aux(d, a.data(), bb.data(), bias ? bv.data() : nullptr, c.data(), aux.data());
  } else {
    b.matmul(d, a.data(), bb.data(), bias ? bv.data() : nullptr, c.data());
  }
  ref::matmul_aux(d, a.data(), bb.data(), bias ? bv.data() : nullptr, g_ref.data(), h_ref.data());
  const double atol = gemm_atol(d);
  Out g = close("c", std::move(c), atol * 1.2, kTranscendental);
  g.atol_each = per_element(h_ref, [t](double h) { return ktest::gelu_forward_slack(t, h); });
  Outs o;
  o.push_back(std::move(g));
  if (keep_aux) o.push_back(close("aux", std::move(aux), atol, kRound));
  return o;
}

/// The backward form: C = gelu'(aux) D and, with a bias gradient, its column sums.
Outs run_backward(const Backend& b, DType t, const Shape& s, bool bias_grad, DType grad_dtype) {
  MatmulDesc d = desc_of(s, t);
  d.has_bias = bias_grad, d.bias_dtype = grad_dtype;
  const Buffer a = random_buffer(t, d.m * d.k, -1.0f, 1.0f, 143);
  const Buffer bb = random_buffer(t, d.k * d.n, -1.0f, 1.0f, 144);
  // Pre-activations over GELU's bend and both tails of its derivative's formula.
  const Buffer aux = random_buffer(t, d.m * d.n, -3.0f, 3.0f, 145);
  Buffer c(t, d.m * d.n), db(grad_dtype, d.n);
  b.matmul_post_op_backward(d, a.data(), bb.data(), aux.data(), c.data(),
                            bias_grad ? db.data() : nullptr);
  // D in f32 by the reference: what the tolerance scales with.
  MatmulDesc plain = d;
  plain.post_op = MatmulPostOp::none, plain.has_bias = false, plain.c_dtype = DType::f32;
  Buffer product(DType::f32, d.m * d.n);
  ref::matmul(plain, a.data(), bb.data(), nullptr, product.data());
  const double atol = gemm_atol(d) * 1.2;
  Out dh = close("c", std::move(c), atol, kTranscendental);
  dh.atol_each = per_element(product, [t](double v) { return ktest::gelu_backward_slack(t, v); });
  Outs o;
  o.push_back(std::move(dh));
  if (!bias_grad) return o;
  std::vector<double> column(static_cast<std::size_t>(d.n), 0.0);
  for (std::int64_t i = 0; i < d.m; ++i) {
    for (std::int64_t j = 0; j < d.n; ++j) {
      column[static_cast<std::size_t>(j)] += std::fabs(product.get(i * d.n + j));
    }
  }
  for (double& v : column) {
    v = ktest::gelu_backward_slack(t, v) + static_cast<double>(d.m) * kEpsF32 * v;
  }
  Out sums = close("bias_grad", std::move(db), atol * static_cast<double>(d.m), kRound);
  sums.atol_each = std::move(column);
  o.push_back(std::move(sums));
  return o;
}

/// Every shape's outputs of one run, one after another.
template <class Run>
Outs over_shapes(Run&& run) {
  Outs o;
  for (const Shape& s : kShapes) {
    for (Out& x : run(s)) o.push_back(std::move(x));
  }
  return o;
}

}  // namespace

void add_matmul_gelu_cases(std::vector<Case>& c) {
  const std::vector<DType> F = all_float();
  c.push_back({"matmul_gelu_tanh", F, [](const Backend& b, DType t) {
                 return over_shapes([&](const Shape& s) {
                   Outs o = run_forward(b, t, s, false, true, t);
                   for (Out& x : run_forward(b, t, s, false, false, t)) o.push_back(std::move(x));
                   return o;
                 });
               }});
  c.push_back({"matmul_aux", F, [](const Backend& b, DType t) {
                 return over_shapes([&](const Shape& s) {
                   Outs o = run_forward(b, t, s, true, true, t);
                   for (Out& x : run_forward(b, t, s, true, false, t)) o.push_back(std::move(x));
                   // an f32 bias with 16-bit C: a GPU's fallback (cuBLASLt's bias has C's type)
                   for (Out& x : run_forward(b, t, s, true, true, DType::f32)) o.push_back(std::move(x));
                   return o;
                 });
               }});
  c.push_back({"matmul_post_op_backward", F, [](const Backend& b, DType t) {
                 return over_shapes([&](const Shape& s) {
                   Outs o = run_backward(b, t, s, true, t);
                   for (Out& x : run_backward(b, t, s, true, DType::f32)) o.push_back(std::move(x));
                   for (Out& x : run_backward(b, t, s, false, t)) o.push_back(std::move(x));
                   return o;
                 });
               }});
}

}  // namespace mixprec::kernels::conformance
