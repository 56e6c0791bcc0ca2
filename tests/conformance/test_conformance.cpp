// Conformance: every op of the frontend, in every dtype, against the scalar reference kernels.
// Inputs are generated once per dtype (so both sides see identical, already-rounded values);
// the frontend runs whatever fast path the CPU allows. Tolerance per element:
//   |out - ref| <= atol + |ref| * k * eps(dtype)
// k covers one rounding of the output plus the few-ulp error of the vectorised exp/log/tanh/erf
// approximations; atol covers reductions whose f32 summation order differs (n * eps32 * sum|x|).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using Ts = std::vector<Tensor>;
using Fn = std::function<Tensor(const Ts&)>;

struct OpCase {
  const char* name;
  std::vector<Shape> shapes;
  float lo, hi;  // input range
  Fn op;         // through the frontend (fast kernels)
  Fn ref;        // through kernels::ref
  double k = 4;  // multiples of eps(dtype)
  double atol = 1e-6;
};

Tensor ref_unary(kernels::UnaryOp op, const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  kernels::ref::unary(op, x.shape(), {x.data_ptr(), x.dtype(), x.strides()}, y.data_ptr(), y.dtype());
  return y;
}

Tensor ref_binary(kernels::BinaryOp op, const Tensor& a, const Tensor& b) {
  // Broadcast b (shape [n] or [1]) against a [m, n].
  Shape sb(a.shape().size(), 0);
  if (b.numel() != 1) sb.back() = 1;
  Tensor y = Tensor::empty(a.shape(), a.dtype());
  kernels::ref::binary(op, a.shape(), {a.data_ptr(), a.dtype(), a.strides()},
                       {b.data_ptr(), b.dtype(), sb}, y.data_ptr(), y.dtype());
  return y;
}

Tensor ref_reduce_rows(kernels::ReduceOp op, const Tensor& x, std::int64_t outer, std::int64_t n,
                       std::int64_t inner, const Shape& out_shape) {
  Tensor y = Tensor::empty(out_shape, x.dtype());
  kernels::ref::reduce(op, x.data_ptr(), x.dtype(), outer, n, inner, y.data_ptr(), y.dtype());
  return y;
}

std::vector<OpCase> cases() {
  using kernels::BinaryOp;
  using kernels::ReduceOp;
  using kernels::UnaryOp;
  std::vector<OpCase> c;
  auto unary = [&](const char* n, Tensor (*f)(const Tensor&), UnaryOp op, float lo, float hi) {
    c.push_back({n, {{37, 129}}, lo, hi, [f](const Ts& x) { return f(x[0]); },
                 [op](const Ts& x) { return ref_unary(op, x[0]); }});
  };
  // Every unary op with a function of its own, over the op list's domain.
#define MIXPREC_CONFORMANCE_UNARY(op, api, policy, reads, grad, simd, ref, lo, hi, why) \
  MIXPREC_OP_IF_##api(unary(#op, mixprec::op, UnaryOp::op, lo, hi);)
  MIXPREC_UNARY_OPS(MIXPREC_CONFORMANCE_UNARY)
#undef MIXPREC_CONFORMANCE_UNARY
  c.push_back({"gelu_tanh", {{37, 129}}, -12, 12,
               [](const Ts& x) { return gelu(x[0], GeluApproximation::tanh); },
               [](const Ts& x) { return ref_unary(UnaryOp::gelu_tanh, x[0]); }});
  auto binary = [&](const char* n, Tensor (*f)(const Tensor&, const Tensor&), BinaryOp op,
                    float lo, float hi, Shape b_shape) {
    c.push_back({n, {{33, 65}, b_shape}, lo, hi,
                 [f](const Ts& x) { return f(x[0], x[1]); },
                 [op](const Ts& x) { return ref_binary(op, x[0], x[1]); }});
  };
  for (Shape bs : {Shape{65}, Shape{1}}) {
    binary("add", add, BinaryOp::add, -3, 3, bs);
    binary("sub", sub, BinaryOp::sub, -3, 3, bs);
    binary("mul", mul, BinaryOp::mul, -3, 3, bs);
    binary("div", div, BinaryOp::div, 0.5f, 3, bs);
    binary("maximum", maximum, BinaryOp::maximum, -3, 3, bs);
    binary("minimum", minimum, BinaryOp::minimum, -3, 3, bs);
  }
  c.push_back({"affine", {{1000}}, -3, 3, [](const Ts& x) { return affine(x[0], 0.5f, -1.0f); },
               [](const Ts& x) {
                 Tensor y = Tensor::empty(x[0].shape(), x[0].dtype());
                 kernels::ref::affine(x[0].data_ptr(), x[0].dtype(), y.data_ptr(), y.dtype(), 1000, 0.5f, -1.0f);
                 return y;
               }});
  // Reductions: sums of up to 4099 terms in different f32 orders: atol = n * 2^-24 * sum|x|.
  c.push_back({"sum_all", {{4099}}, -1, 1, [](const Ts& x) { return sum(x[0]); },
               [](const Ts& x) { return ref_reduce_rows(ReduceOp::sum, x[0], 1, 4099, 1, {}); }, 4, 4099 * 4099 * 6e-8});
  c.push_back({"sum_rows", {{17, 300}}, -1, 1, [](const Ts& x) { return sum(x[0], 1); },
               [](const Ts& x) { return ref_reduce_rows(ReduceOp::sum, x[0], 17, 300, 1, {17}); }, 4, 300 * 300 * 6e-8});
  c.push_back({"sum_cols", {{300, 17}}, -1, 1, [](const Ts& x) { return sum(x[0], 0); },
               [](const Ts& x) { return ref_reduce_rows(ReduceOp::sum, x[0], 1, 300, 17, {17}); }, 4, 300 * 300 * 6e-8});
  c.push_back({"mean_rows", {{17, 300}}, -1, 1, [](const Ts& x) { return mean(x[0], -1); },
               [](const Ts& x) { return ref_reduce_rows(ReduceOp::mean, x[0], 17, 300, 1, {17}); }, 4, 300 * 6e-8});
  c.push_back({"amax_rows", {{17, 300}}, -5, 5, [](const Ts& x) { return amax(x[0], 1); },
               [](const Ts& x) { return ref_reduce_rows(ReduceOp::max, x[0], 17, 300, 1, {17}); }, 0, 0});
  c.push_back({"max_abs", {{1001}}, -5, 5, [](const Ts& x) { return max_abs(x[0]); },
               [](const Ts& x) { return ref_reduce_rows(ReduceOp::amax, x[0], 1, 1001, 1, {}); }, 0, 0});
  c.push_back({"norm", {{1001}}, -2, 2, [](const Ts& x) { return norm(x[0]); },
               [](const Ts& x) { return ref_reduce_rows(ReduceOp::norm2, x[0], 1, 1001, 1, {}); }, 4, 1e-4});
  for (bool lg : {false, true}) {
    c.push_back({lg ? "log_softmax" : "softmax", {{19, 1000}}, -8, 8,
                 [lg](const Ts& x) { return lg ? log_softmax(x[0]) : softmax(x[0]); },
                 [lg](const Ts& x) {
                   Tensor y = Tensor::empty(x[0].shape(), x[0].dtype());
                   kernels::ref::softmax(x[0].data_ptr(), x[0].dtype(), 19, 1000, y.data_ptr(), y.dtype(), lg);
                   return y;
                 }, 8, 1e-6});
  }
  c.push_back({"cross_entropy", {{64, 10}}, -4, 4,
               [](const Ts& x) {
                 std::vector<std::int64_t> t(64);
                 for (int i = 0; i < 64; ++i) t[static_cast<std::size_t>(i)] = (i * 7) % 10;
                 return cross_entropy(x[0], t, 0.1f);
               },
               [](const Ts& x) {
                 std::vector<std::int64_t> t(64);
                 for (int i = 0; i < 64; ++i) t[static_cast<std::size_t>(i)] = (i * 7) % 10;
                 std::vector<float> rows(64);
                 kernels::ref::cross_entropy(x[0].data_ptr(), x[0].dtype(), 64, 10, t.data(), 0.1f, rows.data());
                 double s = 0;
                 for (float v : rows) s += v;
                 return Tensor::scalar(static_cast<float>(s / 64));
               }, 0, 1e-5});
  auto gemm_ref = [](const Tensor& a, const Tensor& b, const Tensor* bias, bool tb) {
    kernels::MatmulDesc d;
    d.m = a.size(0); d.k = a.size(1); d.n = tb ? b.size(0) : b.size(1);
    d.trans_b = tb; d.dtype = a.dtype(); d.c_dtype = a.dtype();
    d.has_bias = bias != nullptr; d.bias_dtype = bias ? bias->dtype() : a.dtype();
    Tensor y = Tensor::empty({d.m, d.n}, a.dtype());
    kernels::ref::matmul(d, a.data_ptr(), b.data_ptr(), bias ? bias->data_ptr() : nullptr, y.data_ptr());
    return y;
  };
  // A 96-term dot product accumulated in f32 in a different order: atol ~ k_terms * eps32.
  c.push_back({"matmul", {{33, 96}, {96, 47}}, -1, 1, [](const Ts& x) { return matmul(x[0], x[1]); },
               [gemm_ref](const Ts& x) { return gemm_ref(x[0], x[1], nullptr, false); }, 2, 96 * 1.2e-7 * 4});
  c.push_back({"linear", {{33, 96}, {47, 96}, {47}}, -1, 1,
               [](const Ts& x) { return linear(x[0], x[1], x[2]); },
               [gemm_ref](const Ts& x) { return gemm_ref(x[0], x[1], &x[2], true); }, 2, 96 * 1.2e-7 * 4});
  return c;
}

class Conformance : public ::testing::TestWithParam<DType> {};

TEST_P(Conformance, EveryOpMatchesTheReference) {
  const DType dtype = GetParam();
  const double eps = traits(dtype).epsilon;
  std::uint64_t seed = 100;
  for (const OpCase& oc : cases()) {
    SCOPED_TRACE(std::string(oc.name) + " " + name(dtype));
    Ts inputs;
    for (const Shape& s : oc.shapes) inputs.push_back(Tensor::uniform(s, ++seed, oc.lo, oc.hi, dtype));
    const Tensor out = oc.op(inputs);
    const Tensor ref = oc.ref(inputs);
    ASSERT_EQ(out.shape(), ref.shape());
    // Losses are f32 ops whatever the input dtype; everything else keeps the input dtype.
    const bool is_loss = std::string(oc.name) == "cross_entropy";
    EXPECT_EQ(out.dtype(), is_loss ? DType::f32 : dtype);
    const std::vector<float> o = out.to_vector(), r = ref.to_vector();
    int bad = 0;
    for (std::size_t i = 0; i < o.size() && bad < 5; ++i) {
      const double tol = oc.atol + std::abs(r[i]) * oc.k * eps;
      const bool same_inf = std::isinf(r[i]) && o[i] == r[i];  // an overflow both agree on
      if (!same_inf && !(std::abs(static_cast<double>(o[i]) - r[i]) <= tol)) {
        ++bad;
        ADD_FAILURE() << "element " << i << ": got " << o[i] << ", reference " << r[i] << ", tol " << tol;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, Conformance,
                         ::testing::Values(DType::f32, DType::bf16, DType::f16),
                         [](const auto& param_info) { return std::string(name(param_info.param)); });

TEST(ConformanceKnownAnswers, SumOf1024Bf16OnesIs1024) {
  EXPECT_EQ(sum(Tensor::ones({1024}, DType::bf16)).item(), 1024.0f);
  EXPECT_EQ(sum(Tensor::ones({32, 1024}, DType::bf16), 1).to_vector(), std::vector<float>(32, 1024.0f));
  EXPECT_EQ(sum(Tensor::ones({1024, 3}, DType::bf16), 0).to_vector(), std::vector<float>(3, 1024.0f));
  // And the dot product behind matmul accumulates in f32 too.
  EXPECT_EQ(matmul(Tensor::ones({1, 1024}, DType::bf16), Tensor::ones({1024, 1}, DType::bf16)).item(), 1024.0f);
}

}  // namespace
}  // namespace mixprec
