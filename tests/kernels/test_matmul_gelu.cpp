// The gelu_tanh post-op of kernels/matmul.h, its aux output and its backward form: the
// reference is the unfused reference kernels bit for bit (the spec's roundings), the cpu
// backend is the unfused cpu kernels bit for bit on every SIMD target (one oneDNN GEMM, then
// the elementwise kernel's vector math and reduce's column tiles), and so the cpu is the
// reference within the GEMM's summation order and the vector gelu_tanh's ulps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;
using ktest::random_buffer;

struct Problem {
  std::int64_t m, n, k;
  bool trans_a, trans_b;
};
// Odd sizes; 600 x 300 has three row chunks and two column blocks in the column-sum tiles,
// 1100 x 260 five row chunks (the gradient pass then takes whole rows per task).
constexpr Problem kProblems[] = {{37, 24, 65, false, true}, {13, 21, 40, true, false},
                                 {600, 300, 33, false, true}, {1100, 260, 17, false, true},
                                 {5, 1, 7, false, false}};

std::string label(const MatmulDesc& d) {
  return std::string(name(d.dtype)) + " m=" + std::to_string(d.m) + " n=" + std::to_string(d.n) +
         " k=" + std::to_string(d.k) + (d.trans_a ? " A^T" : "") + (d.trans_b ? " B^T" : "") +
         (d.has_bias ? std::string(" bias ") + name(d.bias_dtype) : std::string());
}

MatmulDesc gelu_desc(const Problem& p, DType t, bool bias, DType bias_dtype) {
  MatmulDesc d;
  d.m = p.m, d.n = p.n, d.k = p.k, d.trans_a = p.trans_a, d.trans_b = p.trans_b;
  d.dtype = t, d.c_dtype = t, d.has_bias = bias, d.bias_dtype = bias_dtype;
  d.post_op = MatmulPostOp::gelu_tanh;
  return d;
}

/// A set of operands for one problem: A, B, a bias (or bias gradient) buffer and an aux of
/// pre-activations over GELU's bend and tails.
struct Operands {
  Buffer a, b, bias, aux;
  Operands(const MatmulDesc& d, std::uint32_t seed)
      : a(random_buffer(d.dtype, d.m * d.k, -1.0f, 1.0f, seed)),
        b(random_buffer(d.dtype, d.k * d.n, -1.0f, 1.0f, seed + 1)),
        bias(random_buffer(d.bias_dtype, d.n, -1.0f, 1.0f, seed + 2)),
        aux(random_buffer(d.c_dtype, d.m * d.n, -4.0f, 4.0f, seed + 3)) {}
  const void* bias_or_null(const MatmulDesc& d) const { return d.has_bias ? bias.data() : nullptr; }
};

/// The kernels of one backend (the ref:: or the cpu:: functions), to run fused and unfused.
struct Kernels {
  decltype(&ref::matmul) matmul;
  decltype(&ref::matmul_aux) matmul_aux;
  decltype(&ref::matmul_post_op_backward) backward;
  decltype(&ref::unary) unary;
  decltype(&ref::unary_backward) unary_backward;
  decltype(&ref::reduce) reduce;
};
constexpr Kernels kRef{&ref::matmul, &ref::matmul_aux, &ref::matmul_post_op_backward,
                       &ref::unary, &ref::unary_backward, &ref::reduce};
constexpr Kernels kCpu{&cpu::matmul, &cpu::matmul_aux, &cpu::matmul_post_op_backward,
                       &cpu::unary, &cpu::unary_backward, &cpu::reduce};

/// Fused against unfused on one backend, forward (with and without aux) and backward (with and
/// without the bias gradient): the same bits.
void expect_fused_is_unfused(const Kernels& k, const MatmulDesc& d, std::uint32_t seed) {
  SCOPED_TRACE(label(d));
  const Operands in(d, seed);
  const std::int64_t count = d.m * d.n, unit = 1;
  const std::span<const std::int64_t> shape(&count, 1), strides(&unit, 1);
  MatmulDesc plain = d;
  plain.post_op = MatmulPostOp::none;

  Buffer c(d.c_dtype, count), aux(d.c_dtype, count), c_only(d.c_dtype, count);
  Buffer h(d.c_dtype, count), g(d.c_dtype, count);
  k.matmul_aux(d, in.a.data(), in.b.data(), in.bias_or_null(d), c.data(), aux.data());
  k.matmul(d, in.a.data(), in.b.data(), in.bias_or_null(d), c_only.data());
  k.matmul(plain, in.a.data(), in.b.data(), in.bias_or_null(d), h.data());
  k.unary(UnaryOp::gelu_tanh, shape, {h.data(), d.c_dtype, strides}, g.data(), d.c_dtype);
  ktest::expect_bitwise(aux, h, "aux");
  ktest::expect_bitwise(c, g, "C (matmul_aux)");
  ktest::expect_bitwise(c_only, g, "C (matmul)");

  // Backward: the desc's bias names the gradient; the GEMM itself has none.
  plain.has_bias = false;
  Buffer dh(d.c_dtype, count), db(d.bias_dtype, d.n), dg(d.c_dtype, count), dx(d.c_dtype, count);
  Buffer sums(d.bias_dtype, d.n);
  k.backward(d, in.a.data(), in.b.data(), in.aux.data(), dh.data(), d.has_bias ? db.data() : nullptr);
  k.matmul(plain, in.a.data(), in.b.data(), nullptr, dg.data());
  k.unary_backward(UnaryOp::gelu_tanh, in.aux.data(), d.c_dtype, nullptr, d.c_dtype, dg.data(),
                   d.c_dtype, dx.data(), d.c_dtype, count);
  ktest::expect_bitwise(dh, dx, "C (backward)");
  if (!d.has_bias) return;
  k.reduce(ReduceOp::sum, dx.data(), d.c_dtype, 1, d.m, d.n, sums.data(), d.bias_dtype);
  ktest::expect_bitwise(db, sums, "bias gradient");
}

template <class F>
void for_each_case(F&& f) {
  std::uint32_t seed = 100;
  for (DType t : ktest::kAllDTypes) {
    for (const Problem& p : kProblems) {
      for (int bias = 0; bias < 3; ++bias) {  // none, the dtype's, f32
        f(gelu_desc(p, t, bias > 0, bias == 2 ? DType::f32 : t), seed);
        seed += 10;
      }
    }
  }
}

TEST(MatmulGelu, TheReferenceIsTheUnfusedReferenceKernelsBitForBit) {
  for_each_case([](const MatmulDesc& d, std::uint32_t seed) { expect_fused_is_unfused(kRef, d, seed); });
}

TEST(MatmulGelu, TheCpuIsTheUnfusedCpuKernelsBitForBitOnEveryTarget) {
  for (const Isa isa : ktest::isas_to_test()) {
    SCOPED_TRACE(name(isa));
    const ktest::IsaCap cap(isa);
    for_each_case([](const MatmulDesc& d, std::uint32_t seed) { expect_fused_is_unfused(kCpu, d, seed); });
  }
}

// The cpu against the reference: the GEMM's f32 sums in another order (Higham's probabilistic
// bound with a 4x margin, as MatmulVsReference), which may move H across one rounding of the
// dtype; |gelu_tanh'| <= 1.13 carries that into C; the vector gelu_tanh and its gradient add
// their few f32 ulps (elementwise.h), relative to |dG| for the gradient.
TEST(MatmulGelu, TheCpuMatchesTheReferenceWithinTheDtypesTolerance) {
  for_each_case([](const MatmulDesc& d, std::uint32_t seed) {
    SCOPED_TRACE(label(d));
    const Operands in(d, seed);
    const std::int64_t count = d.m * d.n;
    const double e = ktest::eps(d.c_dtype), e32 = ktest::eps(DType::f32);
    const double gemm = 4.0 * std::sqrt(static_cast<double>(d.k) + 2.0) * e32 *
                        (static_cast<double>(d.k) + 1.0);  // |a|, |b|, |bias| <= 1
    Buffer c(d.c_dtype, count), aux(d.c_dtype, count), c_ref(d.c_dtype, count), aux_ref(d.c_dtype, count);
    cpu::matmul_aux(d, in.a.data(), in.b.data(), in.bias_or_null(d), c.data(), aux.data());
    ref::matmul_aux(d, in.a.data(), in.b.data(), in.bias_or_null(d), c_ref.data(), aux_ref.data());
    ktest::expect_close(aux, aux_ref, [&](std::int64_t i) {
      return gemm + 2.0 * e * std::fabs(aux_ref.get(i));
    }, "aux");
    ktest::expect_close(c, c_ref, [&](std::int64_t i) {
      const double h = std::fabs(aux_ref.get(i));
      return 1.13 * (gemm + 2.0 * e * h) + 2.0 * e * std::fabs(c_ref.get(i)) + 8.0 * e32 * h;
    }, "C");

    Buffer dh(d.c_dtype, count), dh_ref(d.c_dtype, count);
    Buffer db(d.bias_dtype, d.n), db_ref(d.bias_dtype, d.n);
    cpu::matmul_post_op_backward(d, in.a.data(), in.b.data(), in.aux.data(), dh.data(),
                                 d.has_bias ? db.data() : nullptr);
    ref::matmul_post_op_backward(d, in.a.data(), in.b.data(), in.aux.data(), dh_ref.data(),
                                 d.has_bias ? db_ref.data() : nullptr);
    // D = op(A) op(B) in f32: the gradient's rounding and ulps scale with it.
    MatmulDesc plain = d;
    plain.post_op = MatmulPostOp::none, plain.has_bias = false, plain.c_dtype = DType::f32;
    Buffer product(DType::f32, count);
    ref::matmul(plain, in.a.data(), in.b.data(), nullptr, product.data());
    const auto dh_tol = [&](std::int64_t i) {
      const double dg = std::fabs(product.get(i));
      return 1.13 * (gemm + e * dg) + 8.0 * e32 * dg + 2.0 * e * std::fabs(dh_ref.get(i));
    };
    ktest::expect_close(dh, dh_ref, dh_tol, "C (backward)");
    if (!d.has_bias) return;
    std::vector<double> sum_tol(static_cast<std::size_t>(d.n), 0.0);
    for (std::int64_t i = 0; i < count; ++i) {
      sum_tol[static_cast<std::size_t>(i % d.n)] +=
          dh_tol(i) + static_cast<double>(d.m) * e32 * std::fabs(dh_ref.get(i));
    }
    ktest::expect_close(db, db_ref, [&](std::int64_t j) {
      return sum_tol[static_cast<std::size_t>(j)] + 2.0 * ktest::eps(d.bias_dtype) * std::fabs(db_ref.get(j));
    }, "bias gradient");
  });
}

TEST(MatmulGelu, EmptyResultsWriteZeroBiasGradients) {
  for (const Kernels* k : {&kRef, &kCpu}) {
    MatmulDesc d = gelu_desc({0, 5, 3, false, false}, DType::bf16, true, DType::f32);
    Buffer db(DType::f32, 5);
    for (std::int64_t j = 0; j < 5; ++j) db.set(j, 7.0f);
    k->backward(d, nullptr, nullptr, nullptr, nullptr, db.data());
    for (std::int64_t j = 0; j < 5; ++j) EXPECT_EQ(db.get(j), 0.0f) << j;
    d.m = 3, d.n = 0;
    k->backward(d, nullptr, nullptr, nullptr, nullptr, nullptr);  // nothing to write
    k->matmul_aux(d, nullptr, nullptr, nullptr, nullptr, nullptr);
  }
}

TEST(MatmulGelu, RefusesWhatItDoesNotDefine) {
  const Problem p{4, 8, 3, false, false};
  const MatmulDesc d = gelu_desc(p, DType::f32, false, DType::f32);
  const Operands in(d, 7);
  Buffer c(DType::f32, 32), aux(DType::f32, 32), db(DType::f32, 8);
  for (const Kernels* k : {&kRef, &kCpu}) {
    MatmulDesc acc = d;
    acc.accumulate = true;  // C + gelu(...): not defined
    EXPECT_THROW(k->matmul(acc, in.a.data(), in.b.data(), nullptr, c.data()), ValueError);
    EXPECT_THROW(k->matmul_aux(acc, in.a.data(), in.b.data(), nullptr, c.data(), aux.data()),
                 ValueError);
    EXPECT_THROW(k->backward(acc, in.a.data(), in.b.data(), aux.data(), c.data(), nullptr),
                 ValueError);
    MatmulDesc relu = d;
    relu.post_op = MatmulPostOp::relu;  // no aux and no backward form for relu
    EXPECT_THROW(k->matmul_aux(relu, in.a.data(), in.b.data(), nullptr, c.data(), aux.data()),
                 ValueError);
    EXPECT_THROW(k->backward(relu, in.a.data(), in.b.data(), aux.data(), c.data(), nullptr),
                 ValueError);
    EXPECT_THROW(k->matmul_aux(d, in.a.data(), in.b.data(), nullptr, c.data(), nullptr), ValueError);
    EXPECT_THROW(k->backward(d, in.a.data(), in.b.data(), nullptr, c.data(), nullptr), ValueError);
    MatmulDesc with_grad = d;
    with_grad.has_bias = true;
    EXPECT_THROW(k->backward(with_grad, in.a.data(), in.b.data(), aux.data(), c.data(), nullptr),
                 ValueError);
    MatmulDesc mixed = d;
    mixed.dtype = DType::bf16, mixed.c_dtype = DType::f16;
    EXPECT_THROW(k->backward(mixed, in.a.data(), in.b.data(), aux.data(), c.data(), nullptr),
                 DTypeError);
  }
}

}  // namespace
}  // namespace mixprec::kernels
