// Every differentiable op's gradient against double-precision finite differences.
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "gradcheck.h"

namespace mixprec::testing {
namespace {

using Ts = std::vector<Tensor>;
using Vs = std::vector<VecD>;

VecD map1(const VecD& x, double (*f)(double)) {
  VecD y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

void check_unary(Tensor (*op)(const Tensor&), double (*ref)(double), float lo = -2, float hi = 2) {
  gradcheck([op](const Ts& x) { return op(x[0]); },
            [ref](const Vs& x) { return map1(x[0], ref); },
            {{{3, 7}, random_values(21, 1, lo, hi)}});
}

// Each unary op with a function of its own (the op list's api column), in double; the test
// fails on an op of the list that has no entry here.
struct UnaryRef {
  double (*f)(double);
  float lo = -2, hi = 2;
};
const std::map<std::string, UnaryRef>& unary_refs() {
  static const std::map<std::string, UnaryRef> refs{
      {"neg", {[](double x) { return -x; }}},
      {"abs", {[](double x) { return std::fabs(x); }}},
      {"exp", {[](double x) { return std::exp(x); }}},
      {"log", {[](double x) { return std::log(x); }, 0.2f, 3.0f}},
      {"sqrt", {[](double x) { return std::sqrt(x); }, 0.2f, 3.0f}},
      {"rsqrt", {[](double x) { return 1.0 / std::sqrt(x); }, 0.3f, 3.0f}},
      {"reciprocal", {[](double x) { return 1.0 / x; }, 0.3f, 3.0f}},
      {"square", {[](double x) { return x * x; }}},
      {"relu", {[](double x) { return x > 0 ? x : 0.0; }}},
      {"gelu", {[](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }}},
      {"tanh", {[](double x) { return std::tanh(x); }}},
      {"sigmoid", {[](double x) { return 1.0 / (1.0 + std::exp(-x)); }}},
      // over the gradient's zero near -1.28 and both tails
      {"silu", {[](double x) { return x / (1.0 + std::exp(-x)); }, -6.0f, 6.0f}},
  };
  return refs;
}

TEST(Gradcheck, UnaryOps) {
  const auto& refs = unary_refs();
#define MIXPREC_GRADCHECK_UNARY(op, api, ...)                                      \
  MIXPREC_OP_IF_##api({                                                           \
    const auto it = refs.find(#op);                                               \
    if (it == refs.end()) {                                                       \
      ADD_FAILURE() << #op << ": add its double-precision reference to unary_refs"; \
    } else {                                                                      \
      SCOPED_TRACE(#op);                                                          \
      check_unary(mixprec::op, it->second.f, it->second.lo, it->second.hi);       \
    }                                                                             \
  })
  MIXPREC_UNARY_OPS(MIXPREC_GRADCHECK_UNARY)
#undef MIXPREC_GRADCHECK_UNARY
}

// The tanh GELU in PyTorch's own formula (not the kernels' x / (1 + e^-w) rewrite), over a
// range that crosses the gradient's zero near -0.75 and its large-|x| tails.
TEST(Gradcheck, GeluTanh) {
  const auto ref = [](double x) {
    const double k = std::sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  };
  for (auto [lo, hi] : {std::pair{-2.0f, 2.0f}, std::pair{-6.0f, 6.0f}}) {
    gradcheck([](const Ts& x) { return gelu(x[0], GeluApproximation::tanh); },
              [ref](const Vs& x) { return map1(x[0], +ref); },
              {{{3, 7}, random_values(21, 9, lo, hi)}});
  }
}

// Binary ops with broadcasting: a [4, 5] op b [5] (row broadcast) and a [4, 1] op b [1, 5].
void check_binary(Tensor (*op)(const Tensor&, const Tensor&), double (*ref)(double, double),
                  float lo = -2, float hi = 2) {
  gradcheck([op](const Ts& x) { return op(x[0], x[1]); },
            [ref](const Vs& x) {
              VecD y(20);
              for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 5; ++j) y[i * 5 + j] = ref(x[0][i * 5 + j], x[1][j]);
              return y;
            },
            {{{4, 5}, random_values(20, 2, lo, hi)}, {{5}, random_values(5, 3, lo, hi)}});
  gradcheck([op](const Ts& x) { return op(x[0], x[1]); },
            [ref](const Vs& x) {
              VecD y(20);
              for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 5; ++j) y[i * 5 + j] = ref(x[0][i], x[1][j]);
              return y;
            },
            {{{4, 1}, random_values(4, 4, lo, hi)}, {{1, 5}, random_values(5, 5, lo, hi)}});
}

TEST(Gradcheck, BinaryOpsWithBroadcasting) {
  check_binary(add, [](double a, double b) { return a + b; });
  check_binary(sub, [](double a, double b) { return a - b; });
  check_binary(mul, [](double a, double b) { return a * b; });
  check_binary(div, [](double a, double b) { return a / b; }, 0.5f, 2.0f);
  check_binary(maximum, [](double a, double b) { return a > b ? a : b; });
  check_binary(minimum, [](double a, double b) { return a < b ? a : b; });
}

TEST(Gradcheck, PowAndCumsum) {
  // pow runs the pow kernel with a broadcast exponent; positive bases keep x^p real.
  for (float p : {2.0f, 0.5f, -1.5f, 3.0f}) {
    gradcheck([p](const Ts& x) { return pow(x[0], p); },
              [p](const Vs& x) {
                VecD y(x[0].size());
                for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::pow(x[0][i], double{p});
                return y;
              },
              {{{3, 4}, random_values(12, 30, 0.5f, 2.0f)}});
  }
  gradcheck([](const Ts& x) { return cumsum(x[0]); },
            [](const Vs& x) {
              VecD y(12);
              for (int i = 0; i < 3; ++i) {
                double acc = 0;
                for (int j = 0; j < 4; ++j) y[i * 4 + j] = acc += x[0][i * 4 + j];
              }
              return y;
            },
            {{{3, 4}, random_values(12, 31)}});
}

TEST(Gradcheck, NormAtZeroHasTheZeroSubgradient) {
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = Tensor::zeros({5}, dt);
    x.set_requires_grad();
    norm(x).backward();
    for (float g : x.grad().to_vector()) EXPECT_EQ(g, 0.0f) << name(dt);
    EXPECT_EQ(x.grad().dtype(), dt);
  }
}

TEST(Gradcheck, Where) {
  // The condition is data, not a variable: zeros (one negative), NaN (counts as true), others.
  const std::vector<float> cv = {1, 0, 1, 1, 0, NAN, 0, -0.0f, 2, 0, -3, 0};
  const Tensor cond = Tensor::from_vector(cv, {3, 4});
  gradcheck([cond](const Ts& x) { return where(cond, x[0], x[1]); },
            [cv](const Vs& x) {
              VecD y(cv.size());
              for (std::size_t i = 0; i < y.size(); ++i) y[i] = cv[i] != 0.0f ? x[0][i] : x[1][i];
              return y;
            },
            {{{3, 4}, random_values(12, 40)}, {{3, 4}, random_values(12, 41)}});
  // A selection, not arithmetic: Inf and NaN in the branch not taken never reach the output.
  const Tensor inf = Tensor::full({3, 4}, INFINITY), nan = Tensor::full({3, 4}, NAN);
  const std::vector<float> picked = where(cond, inf, nan).to_vector();
  for (std::size_t i = 0; i < cv.size(); ++i) {
    if (cv[i] != 0.0f) EXPECT_TRUE(std::isinf(picked[i])) << i;
    else EXPECT_TRUE(std::isnan(picked[i])) << i;
  }
}

TEST(Gradcheck, Affine) {
  gradcheck([](const Ts& x) { return affine(x[0], -1.5f, 0.25f); },
            [](const Vs& x) {
              VecD y = x[0];
              for (double& v : y) v = -1.5 * v + 0.25;
              return y;
            },
            {{{6}, random_values(6, 6)}});
}

TEST(Gradcheck, Reductions) {
  gradcheck([](const Ts& x) { return sum(x[0]); },
            [](const Vs& x) { double s = 0; for (double v : x[0]) s += v; return VecD{s}; },
            {{{3, 4}, random_values(12, 7)}});
  gradcheck([](const Ts& x) { return mean(x[0]); },
            [](const Vs& x) { double s = 0; for (double v : x[0]) s += v; return VecD{s / 12}; },
            {{{3, 4}, random_values(12, 8)}});
  gradcheck([](const Ts& x) { return sum(x[0], 0); },
            [](const Vs& x) {
              VecD y(4, 0.0);
              for (int i = 0; i < 3; ++i) for (int j = 0; j < 4; ++j) y[j] += x[0][i * 4 + j];
              return y;
            },
            {{{3, 4}, random_values(12, 9)}});
  gradcheck([](const Ts& x) { return mean(x[0], 1, true); },
            [](const Vs& x) {
              VecD y(3, 0.0);
              for (int i = 0; i < 3; ++i) for (int j = 0; j < 4; ++j) y[i] += x[0][i * 4 + j] / 4;
              return y;
            },
            {{{3, 4}, random_values(12, 10)}});
  gradcheck([](const Ts& x) { return amax(x[0], 1); },
            [](const Vs& x) {
              VecD y(3, -1e300);
              for (int i = 0; i < 3; ++i) for (int j = 0; j < 4; ++j) y[i] = std::max(y[i], x[0][i * 4 + j]);
              return y;
            },
            {{{3, 4}, random_values(12, 11)}});
  gradcheck([](const Ts& x) { return norm(x[0]); },
            [](const Vs& x) { double s = 0; for (double v : x[0]) s += v * v; return VecD{std::sqrt(s)}; },
            {{{7}, random_values(7, 12)}});
}

VecD ref_matmul(const VecD& a, const VecD& b, int m, int k, int n) {
  VecD c(static_cast<std::size_t>(m * n), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

TEST(Gradcheck, MatmulAndLinear) {
  gradcheck([](const Ts& x) { return matmul(x[0], x[1]); },
            [](const Vs& x) { return ref_matmul(x[0], x[1], 3, 4, 5); },
            {{{3, 4}, random_values(12, 13)}, {{4, 5}, random_values(20, 14)}});
  gradcheck([](const Ts& x) { return matmul(x[0], x[1]); },
            [](const Vs& x) {
              VecD out;
              for (int bi = 0; bi < 2; ++bi) {
                VecD a(x[0].begin() + bi * 6, x[0].begin() + bi * 6 + 6);
                VecD b(x[1].begin() + bi * 8, x[1].begin() + bi * 8 + 8);
                VecD c = ref_matmul(a, b, 3, 2, 4);
                out.insert(out.end(), c.begin(), c.end());
              }
              return out;
            },
            {{{2, 3, 2}, random_values(12, 15)}, {{2, 2, 4}, random_values(16, 16)}});
  // linear: x [2, 3, 4] (leading dims flattened), W [5, 4], b [5].
  gradcheck([](const Ts& x) { return linear(x[0], x[1], x[2]); },
            [](const Vs& x) {
              VecD y(30, 0.0);
              for (int r = 0; r < 6; ++r)
                for (int o = 0; o < 5; ++o) {
                  double s = x[2][o];
                  for (int i = 0; i < 4; ++i) s += x[0][r * 4 + i] * x[1][o * 4 + i];
                  y[r * 5 + o] = s;
                }
              return y;
            },
            {{{2, 3, 4}, random_values(24, 17)}, {{5, 4}, random_values(20, 18)},
             {{5}, random_values(5, 19)}});
  gradcheck([](const Ts& x) { return linear(x[0], x[1]); },
            [](const Vs& x) {
              VecD y(6, 0.0);
              for (int r = 0; r < 2; ++r)
                for (int o = 0; o < 3; ++o)
                  for (int i = 0; i < 4; ++i) y[r * 3 + o] += x[0][r * 4 + i] * x[1][o * 4 + i];
              return y;
            },
            {{{2, 4}, random_values(8, 20)}, {{3, 4}, random_values(12, 21)}});
}

VecD ref_log_softmax(const VecD& x, int rows, int cols) {
  VecD y(x.size());
  for (int r = 0; r < rows; ++r) {
    double mx = -1e300, s = 0;
    for (int c = 0; c < cols; ++c) mx = std::max(mx, x[r * cols + c]);
    for (int c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - mx);
    for (int c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] - mx - std::log(s);
  }
  return y;
}

TEST(Gradcheck, SoftmaxFamilyAndLosses) {
  gradcheck([](const Ts& x) { return log_softmax(x[0]); },
            [](const Vs& x) { return ref_log_softmax(x[0], 3, 6); },
            {{{3, 6}, random_values(18, 22)}});
  gradcheck([](const Ts& x) { return softmax(x[0]); },
            [](const Vs& x) {
              VecD y = ref_log_softmax(x[0], 3, 6);
              for (double& v : y) v = std::exp(v);
              return y;
            },
            {{{3, 6}, random_values(18, 23)}});
  const std::vector<std::int64_t> targets{2, 0, 5, 1};
  for (float smoothing : {0.0f, 0.1f}) {
    gradcheck([&](const Ts& x) { return cross_entropy(x[0], targets, smoothing); },
              [&](const Vs& x) {
                const VecD lp = ref_log_softmax(x[0], 4, 6);
                double loss = 0;
                for (int r = 0; r < 4; ++r) {
                  double all = 0;
                  for (int c = 0; c < 6; ++c) all += lp[r * 6 + c];
                  loss += -(1 - smoothing) * lp[r * 6 + targets[r]] - smoothing / 6 * all;
                }
                return VecD{loss / 4};
              },
              {{{4, 6}, random_values(24, 24)}});
  }
  gradcheck([](const Ts& x) { return mse_loss(x[0], x[1]); },
            [](const Vs& x) {
              double s = 0;
              for (std::size_t i = 0; i < x[0].size(); ++i) s += (x[0][i] - x[1][i]) * (x[0][i] - x[1][i]);
              return VecD{s / static_cast<double>(x[0].size())};
            },
            {{{2, 5}, random_values(10, 25)}, {{2, 5}, random_values(10, 26)}});
}

TEST(Gradcheck, Dropout) {
  // The mask is a pure function of the seed, so the reference can rebuild it.
  gradcheck([](const Ts& x) { return dropout(x[0], 0.3f, true, 77); },
            [](const Vs& x) {
              VecD y(x[0].size());
              for (std::size_t i = 0; i < y.size(); ++i)
                y[i] = mixprec::uniform(77, i) >= 0.3f ? x[0][i] * static_cast<double>(1.0f / 0.7f) : 0.0;
              return y;
            },
            {{{40}, random_values(40, 27)}});
}

TEST(Gradcheck, Views) {
  gradcheck([](const Ts& x) { return x[0].reshape({4, 3}) * 2.0f; },
            [](const Vs& x) { VecD y = x[0]; for (double& v : y) v *= 2; return y; },
            {{{3, 4}, random_values(12, 28)}});
  gradcheck([](const Ts& x) { return x[0].transpose(0, 1).contiguous(); },
            [](const Vs& x) {
              VecD y(12);
              for (int i = 0; i < 3; ++i) for (int j = 0; j < 4; ++j) y[j * 3 + i] = x[0][i * 4 + j];
              return y;
            },
            {{{3, 4}, random_values(12, 29)}});
  gradcheck([](const Ts& x) { return x[0].permute({2, 0, 1}).contiguous(); },
            [](const Vs& x) {
              VecD y(24);
              for (int a = 0; a < 2; ++a) for (int b = 0; b < 3; ++b) for (int c = 0; c < 4; ++c)
                y[c * 6 + a * 3 + b] = x[0][a * 12 + b * 4 + c];
              return y;
            },
            {{{2, 3, 4}, random_values(24, 30)}});
  gradcheck([](const Ts& x) { return x[0].slice(1, 1, 6, 2) * 3.0f; },
            [](const Vs& x) {
              VecD y;
              for (int i = 0; i < 2; ++i) for (int j = 1; j < 6; j += 2) y.push_back(3 * x[0][i * 7 + j]);
              return y;
            },
            {{{2, 7}, random_values(14, 31)}});
}

TEST(Gradcheck, SharedInputAccumulatesOverPaths) {
  // x is used three times: gradients from every path must add up.
  gradcheck([](const Ts& x) { return mul(x[0], x[0]) + exp(x[0]); },
            [](const Vs& x) { VecD y = x[0]; for (double& v : y) v = v * v + std::exp(v); return y; },
            {{{8}, random_values(8, 32)}});
}

}  // namespace
}  // namespace mixprec::testing
