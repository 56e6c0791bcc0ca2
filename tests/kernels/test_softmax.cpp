// Softmax, log-softmax and cross-entropy: kernels:: against kernels::ref:: for every dtype pair
// and odd row lengths, at every SIMD level this CPU supports (each a different Highway target,
// scalar included); rows split over threads (few long rows) and rows on one thread give the same
// bits whatever the thread count; NaN/Inf rows, extreme logits (+-1e4, the f16 maximum), known
// answers (rows sum to 1, a 1e4 spread stays finite, a hand-computed smoothed loss, backward =
// softmax - onehot), argument errors, the verbose log, and finite-difference checks of both
// backward kernels against the forward kernels.
#include <gtest/gtest.h>

#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/softmax.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;

struct Rows {
  std::int64_t rows, cols;
};
// Lengths around the vector widths (tails), many short rows, rows of several 16K chunks (split
// over threads when there are few of them: 1 x 200001, 2 x 70001), and a [16, 4096] block.
const std::vector<Rows> kShapes = {{1, 1},   {2, 7},     {3, 15},     {5, 17},   {4, 33},
                                   {7, 1000}, {2, 70001}, {1, 200001}, {256, 10}, {16, 4096}};
constexpr std::array<std::pair<DType, DType>, 6> kPairs{{{DType::f32, DType::f32},
                                                         {DType::bf16, DType::bf16},
                                                         {DType::f16, DType::f16},
                                                         {DType::bf16, DType::f32},
                                                         {DType::f16, DType::f32},
                                                         {DType::f32, DType::bf16}}};

std::string label(const char* op, DType in, DType out, const Rows& s, Isa isa) {
  return std::string(op) + " " + name(in) + "->" + name(out) + " [" + std::to_string(s.rows) +
         "," + std::to_string(s.cols) + "] isa=" + name(isa);
}

/// Sum reordering: the reference adds a row left to right in f32, the vector code in 16 lane
/// partial sums. For positive terms (the exps) each order is within (n-1) u of the exact sum
/// (u = eps/2), so they differ by less than n eps relative. That bound is rigorous and the
/// reference does get near it on long rows (terms below half an ulp of the running sum
/// vanish: 9e-5 relative at 70001 columns); the tight check of the vector sum itself is
/// RowsSumToOne. Plus 4 eps for exp/log (<= 1 ulp each, glibc <= 1 ulp) and the products.
double sum_rel(std::int64_t cols) {
  return ktest::eps(DType::f32) * (4.0 + static_cast<double>(cols));
}

/// Output tolerance floor: one subnormal unit for 16-bit outputs, 16 for f32 (whose tiny
/// probabilities can be subnormal and lose relative precision).
double atol(DType out) { return traits(out).min_subnormal * (out == DType::f32 ? 16 : 1); }

std::vector<std::int64_t> targets_for(const Rows& s) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(s.rows));
  for (std::int64_t r = 0; r < s.rows; ++r) t[r] = (r * 7919 + 3) % s.cols;
  return t;
}

TEST(SoftmaxKernels, ForwardMatchesReference) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (bool log : {false, true}) {
      for (auto [in, out] : kPairs) {
        for (const Rows& s : kShapes) {
          const Buffer x = ktest::random_buffer(in, s.rows * s.cols, -8.0f, 8.0f, 31);
          Buffer got(out, s.rows * s.cols), want(out, s.rows * s.cols);
          softmax(x.data(), in, s.rows, s.cols, got.data(), out, log);
          ref::softmax(x.data(), in, s.rows, s.cols, want.data(), out, log);
          const std::string what = label(log ? "log_softmax" : "softmax", in, out, s, isa);
          const double rel = sum_rel(s.cols), eo = 2 * ktest::eps(out);
          // softmax: relative; log_softmax = (x - m) - lse with |out| >= lse >= 0 (both terms
          // non-positive), so the error of lse is bounded relative to |out| + 1.
          ktest::expect_close(got, want, [&](std::int64_t i) {
            const double w = std::fabs(want.get(i));
            return atol(out) + w * eo + (log ? (1.0 + w) * rel : w * rel);
          }, what);
        }
      }
    }
  }
}

TEST(SoftmaxKernels, BackwardMatchesReference) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (bool log : {false, true}) {
      for (auto [in, out] : kPairs) {
        for (const Rows& s : kShapes) {
          const std::int64_t n = s.rows * s.cols;
          const Buffer x = ktest::random_buffer(DType::f32, n, -4.0f, 4.0f, 41);
          Buffer y(in, n);  // a genuine (log-)softmax output, stored in the input dtype
          ref::softmax(x.data(), DType::f32, s.rows, s.cols, y.data(), in, log);
          const Buffer dy = ktest::random_buffer(in, n, -1.0f, 1.0f, 42);
          Buffer got(out, n), want(out, n);
          softmax_backward(y.data(), in, dy.data(), in, s.rows, s.cols, got.data(), out, log);
          ref::softmax_backward(y.data(), in, dy.data(), in, s.rows, s.cols, want.data(), out,
                                log);
          const std::string what =
              label(log ? "log_softmax_backward" : "softmax_backward", in, out, s, isa);
          // The row sum (sum dy*y, or sum dy) is reordered; its error scales with the sum of
          // magnitudes and reaches element c through y_c (softmax) or exp(y_c) (log-softmax).
          std::vector<double> mag(static_cast<std::size_t>(s.rows), 0.0);
          for (std::int64_t i = 0; i < n; ++i) {
            mag[i / s.cols] += std::fabs(dy.get(i) * (log ? 1.0 : y.get(i)));
          }
          const double rel = sum_rel(s.cols), eo = 2 * ktest::eps(out);
          ktest::expect_close(got, want, [&](std::int64_t i) {
            const double through = log ? std::exp(static_cast<double>(y.get(i)))
                                       : std::fabs(y.get(i));
            return atol(out) + std::fabs(want.get(i)) * eo + through * mag[i / s.cols] * rel +
                   4 * ktest::eps(DType::f32) * std::fabs(dy.get(i));
          }, what);
        }
      }
    }
  }
}

TEST(CrossEntropyKernels, ForwardAndBackwardMatchReference) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (float smoothing : {0.0f, 0.1f}) {
      for (auto [in, out] : kPairs) {
        for (const Rows& s : kShapes) {
          const std::int64_t n = s.rows * s.cols;
          const Buffer x = ktest::random_buffer(in, n, -6.0f, 6.0f, 51);
          const std::vector<std::int64_t> t = targets_for(s);
          Buffer loss(DType::f32, s.rows), loss_ref(DType::f32, s.rows);
          cross_entropy(x.data(), in, s.rows, s.cols, t.data(), smoothing,
                        static_cast<float*>(loss.data()));
          ref::cross_entropy(x.data(), in, s.rows, s.cols, t.data(), smoothing,
                             static_cast<float*>(loss_ref.data()));
          const Buffer g = ktest::random_buffer(DType::f32, s.rows, 0.5f, 2.0f, 52);
          Buffer got(out, n), want(out, n);
          cross_entropy_backward(x.data(), in, s.rows, s.cols, t.data(), smoothing,
                                 static_cast<const float*>(g.data()), got.data(), out);
          ref::cross_entropy_backward(x.data(), in, s.rows, s.cols, t.data(), smoothing,
                                      static_cast<const float*>(g.data()), want.data(), out);
          const std::string what = label("cross_entropy", in, out, s, isa) +
                                   " s=" + std::to_string(smoothing);
          // Every |logp_c| <= max_c |x_c - m| + log(cols): the scale of the loss's rounding.
          const double rel = sum_rel(s.cols);
          const double scale = 12.0 + std::log(static_cast<double>(s.cols)) + 1.0;
          ktest::expect_close(loss, loss_ref, [&](std::int64_t r) {
            return scale * rel + std::fabs(loss_ref.get(r)) * 2 * ktest::eps(DType::f32);
          }, what);
          // dlogits = g (p - q): p carries softmax's relative error; q (the smoothed one-hot)
          // is computed identically. p is recovered from the reference as want/g + q.
          const double eo = 2 * ktest::eps(out);
          ktest::expect_close(got, want, [&](std::int64_t i) {
            const std::int64_t r = i / s.cols, c = i % s.cols;
            const double q = smoothing / static_cast<double>(s.cols) +
                             (c == t[r] ? 1.0 - smoothing : 0.0);
            const double w = want.get(i) / g.get(r);
            const double p = std::fabs(w + q) + std::fabs(w) * ktest::eps(out);
            return atol(out) + std::fabs(want.get(i)) * eo + g.get(r) * p * rel;
          }, what + " backward");
        }
      }
    }
  }
}

// sum_c p_c = sum_c e_c / S with S the kernel's own f32 sum of the e_c: this measures S's
// rounding error directly, so a lost or doubled element (>= 1e-5 relative here) shows.
TEST(SoftmaxKnownAnswers, RowsSumToOne) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType out : ktest::kAllDTypes) {
      for (const Rows s : {Rows{9, 1001}, Rows{2, 70001}}) {
      const Buffer x = ktest::random_buffer(DType::f32, s.rows * s.cols, -10.0f, 10.0f, 61);
      Buffer y(out, s.rows * s.cols);
      softmax(x.data(), DType::f32, s.rows, s.cols, y.data(), out, false);
      for (std::int64_t r = 0; r < s.rows; ++r) {
        double sum = 0;
        for (std::int64_t c = 0; c < s.cols; ++c) sum += y.get(r * s.cols + c);
        // Each p rounds to out once (relative eps/2), so that adds <= eps/2 to the sum; the
        // f32 sum S of the exps is within ~u sqrt(n) (random-walk rounding) of the exact one.
        const double tol = ktest::eps(out) / 2 + 4 * ktest::eps(DType::f32) *
                                                     std::sqrt(static_cast<double>(s.cols));
        EXPECT_NEAR(sum, 1.0, tol) << name(out) << " row " << r << " cols " << s.cols
                                   << " isa=" << name(isa);
      }
      }
    }
  }
}

TEST(SoftmaxKnownAnswers, LogSoftmaxOfAWideSpreadStaysFinite) {
  const float x[] = {0.0f, 1e4f, -1e4f, 5e3f, 1e4f - 1.0f, -3.0f, 7.0f, 2e3f,
                     1e4f, -1e4f, 0.5f, 9e3f, 1.0f, 2.0f, 3.0f, 4.0f, 1e4f - 2.0f};
  constexpr std::int64_t n = 17;
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    float y[n], p[n];
    softmax(x, DType::f32, 1, n, y, DType::f32, true);
    softmax(x, DType::f32, 1, n, p, DType::f32, false);
    // Two entries at 1e4, one at 1e4-1 and one at 1e4-2 share the mass.
    const double lse = 1e4 + std::log(2.0 + std::exp(-1.0) + std::exp(-2.0));
    for (std::int64_t c = 0; c < n; ++c) {
      EXPECT_TRUE(std::isfinite(y[c])) << c;
      EXPECT_NEAR(y[c], x[c] - lse, 1e-3) << c << " isa=" << name(isa);
      EXPECT_TRUE(std::isfinite(p[c])) << c;
    }
    EXPECT_EQ(p[2], 0.0f);
    EXPECT_NEAR(p[1], 1.0 / (2.0 + std::exp(-1.0) + std::exp(-2.0)), 1e-6);
  }
}

TEST(CrossEntropyKnownAnswers, LabelSmoothingMatchesHandComputedValues) {
  // logits [1, 2, 3], target 2, s = 0.1: lse = log(e + e^2 + e^3) = 3.40760596...,
  // loss = 0.9 * (3 - lse) * -1 - 0.1/3 * sum_c (c - lse) = 0.50760596444438.
  // logits [0.5, -1.25, 2, 0], target 1, s = 0.2: loss = 3.27199861260366.
  struct Case {
    std::vector<float> logits;
    std::int64_t target;
    float s;
    double loss;
  };
  const Case cases[] = {{{1.0f, 2.0f, 3.0f}, 2, 0.1f, 0.5076059644443801},
                        {{0.5f, -1.25f, 2.0f, 0.0f}, 1, 0.2f, 3.271998612603663}};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (DType dt : ktest::kAllDTypes) {  // the logits are exact in every dtype
      for (const Case& c : cases) {
        const std::int64_t cols = static_cast<std::int64_t>(c.logits.size());
        Buffer x(dt, cols);
        for (std::int64_t i = 0; i < cols; ++i) x.set(i, c.logits[i]);
        float loss = 0;
        cross_entropy(x.data(), dt, 1, cols, &c.target, c.s, &loss);
        EXPECT_NEAR(loss, c.loss, 4e-7 * c.loss) << name(dt) << " isa=" << name(isa);
      }
    }
  }
}

TEST(CrossEntropyKnownAnswers, BackwardIsSoftmaxMinusOneHot) {
  const Rows s{5, 37};
  const Buffer x = ktest::random_buffer(DType::f32, s.rows * s.cols, -5.0f, 5.0f, 71);
  const std::vector<std::int64_t> t = targets_for(s);
  const std::vector<float> ones(static_cast<std::size_t>(s.rows), 1.0f);
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    std::vector<float> d(static_cast<std::size_t>(s.rows * s.cols)), p(d.size());
    cross_entropy_backward(x.data(), DType::f32, s.rows, s.cols, t.data(), 0.0f, ones.data(),
                           d.data(), DType::f32);
    softmax(x.data(), DType::f32, s.rows, s.cols, p.data(), DType::f32, false);
    for (std::int64_t r = 0; r < s.rows; ++r) {
      for (std::int64_t c = 0; c < s.cols; ++c) {
        const std::int64_t i = r * s.cols + c;
        // Same max, same exp sum, same p = e * (1/sum): equal bit for bit off the target; at
        // the target the compiler may fuse e * (1/sum) - 1 into one FMA, skipping p's
        // rounding: half an ulp of p, then the result may round the other way (an ulp of it).
        if (c != t[r]) {
          EXPECT_EQ(d[i], p[i]) << r << "," << c << " " << name(isa);
        } else {
          EXPECT_NEAR(d[i], p[i] - 1.0f, 1.5 * ktest::eps(DType::f32))  // both < 1 in size
              << r << " " << name(isa);
        }
      }
    }
  }
}

TEST(CrossEntropyErrors, TargetOutOfRangeAndBadSmoothingThrowValueError) {
  const float x[6] = {0, 1, 2, 3, 4, 5};
  float loss[2];
  float d[6];
  const float g[2] = {1, 1};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (std::int64_t bad : {3, -1, 100}) {
      const std::int64_t t[2] = {0, bad};
      try {
        cross_entropy(x, DType::f32, 2, 3, t, 0.0f, loss);
        ADD_FAILURE() << "expected ValueError for target " << bad;
      } catch (const ValueError& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind("cross_entropy:", 0), 0u) << msg;
        EXPECT_NE(msg.find("row 1"), std::string::npos) << msg;
      }
      try {
        cross_entropy_backward(x, DType::f32, 2, 3, t, 0.0f, g, d, DType::f32);
        ADD_FAILURE() << "expected ValueError for target " << bad;
      } catch (const ValueError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("cross_entropy_backward:", 0), 0u) << e.what();
      }
      EXPECT_THROW(ref::cross_entropy(x, DType::f32, 2, 3, t, 0.0f, loss), ValueError);
    }
    const std::int64_t ok[2] = {0, 2};
    EXPECT_THROW(cross_entropy(x, DType::f32, 2, 3, ok, 1.5f, loss), ValueError);
    EXPECT_THROW(cross_entropy(x, DType::f32, 2, 3, ok, -0.1f, loss), ValueError);
  }
}

/// f32 loss L(x) = sum_i w_i f(x)_i for a forward kernel f; gradients come from the backward
/// kernels; central differences with h = 1e-2 evaluated in double over the f32 forward
/// outputs. Rounding of L (|L| <~ 5, eps 1.2e-7) contributes <~ 3e-5 after dividing by 2h,
/// truncation h^2/6 |L'''| <~ 2e-5: hence 1e-4 absolute + 1e-3 relative, while a wrong
/// formula is off by O(|grad|) ~ 0.1..1.
template <class Loss>
void expect_gradient(std::vector<float> x, const std::vector<float>& grad, Loss loss,
                     const std::string& what) {
  const double h = 1e-2;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float orig = x[i];
    const float xp = static_cast<float>(orig + h), xm = static_cast<float>(orig - h);
    x[i] = xp;
    const double lp = loss(x);
    x[i] = xm;
    const double lm = loss(x);
    x[i] = orig;
    const double fd = (lp - lm) / (static_cast<double>(xp) - xm);
    EXPECT_NEAR(grad[i], fd, 1e-4 + 1e-3 * std::fabs(fd)) << what << " at " << i;
  }
}

TEST(SoftmaxBackward, FiniteDifferencesOfTheForwardKernel) {
  const Rows s{3, 7};
  const std::size_t n = static_cast<std::size_t>(s.rows * s.cols);
  const Buffer xb = ktest::random_buffer(DType::f32, s.rows * s.cols, -2.0f, 2.0f, 81);
  const Buffer wb = ktest::random_buffer(DType::f32, s.rows * s.cols, -1.0f, 1.0f, 82);
  std::vector<float> x(n), w(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = xb.get(static_cast<std::int64_t>(i));
    w[i] = wb.get(static_cast<std::int64_t>(i));
  }
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (bool log : {false, true}) {
      auto loss = [&](const std::vector<float>& in) {
        std::vector<float> y(n);
        softmax(in.data(), DType::f32, s.rows, s.cols, y.data(), DType::f32, log);
        double l = 0;
        for (std::size_t i = 0; i < n; ++i) l += static_cast<double>(w[i]) * y[i];
        return l;
      };
      std::vector<float> y(n), dx(n);
      softmax(x.data(), DType::f32, s.rows, s.cols, y.data(), DType::f32, log);
      softmax_backward(y.data(), DType::f32, w.data(), DType::f32, s.rows, s.cols, dx.data(),
                       DType::f32, log);
      expect_gradient(x, dx, loss,
                      std::string(log ? "log_softmax" : "softmax") + " isa=" + name(isa));
    }
  }
}

TEST(CrossEntropyBackward, FiniteDifferencesOfTheForwardKernel) {
  const Rows s{4, 6};
  const std::size_t n = static_cast<std::size_t>(s.rows * s.cols);
  const Buffer xb = ktest::random_buffer(DType::f32, s.rows * s.cols, -3.0f, 3.0f, 91);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = xb.get(static_cast<std::int64_t>(i));
  const std::vector<std::int64_t> t = targets_for(s);
  const std::vector<float> g = {1.0f, -0.5f, 2.0f, 0.25f};
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    for (float smoothing : {0.0f, 0.1f}) {
      auto loss = [&](const std::vector<float>& in) {
        std::vector<float> l(static_cast<std::size_t>(s.rows));
        cross_entropy(in.data(), DType::f32, s.rows, s.cols, t.data(), smoothing, l.data());
        double total = 0;
        for (std::int64_t r = 0; r < s.rows; ++r) total += static_cast<double>(g[r]) * l[r];
        return total;
      };
      std::vector<float> dx(n);
      cross_entropy_backward(x.data(), DType::f32, s.rows, s.cols, t.data(), smoothing, g.data(),
                             dx.data(), DType::f32);
      expect_gradient(x, dx, loss,
                      "cross_entropy s=" + std::to_string(smoothing) + " isa=" + name(isa));
    }
  }
}

// MIXPREC_VERBOSE names the Highway target that ran, at every level (so each level really
// reaches a different compiled target).
TEST(SoftmaxDispatch, VerboseLogNamesTheHighwayTarget) {
  const float x[4] = {1, 2, 3, 4};
  float y[4];
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    set_verbose(true);
    testing::internal::CaptureStderr();
    softmax(x, DType::f32, 1, 4, y, DType::f32, false);
    const std::string log = testing::internal::GetCapturedStderr();
    set_verbose(false);
    EXPECT_NE(log.find(std::string("mixprec: softmax f32: ran ") + simd_target()),
              std::string::npos)
        << log;
    if (isa == Isa::scalar) {
      EXPECT_NE(log.find("ran SCALAR"), std::string::npos) << log;
    }
  }
}

/// Rows with a NaN, a +Inf, only -Inf, some -Inf, and ordinary rows, at row lengths with tails
/// and one split over threads.
Buffer special_rows(DType dt, const Rows& s) {
  const float inf = std::numeric_limits<float>::infinity();
  Buffer x = ktest::random_buffer(dt, s.rows * s.cols, -3.0f, 3.0f, 23);
  const auto row = [&](std::int64_t r) { return (r % s.rows) * s.cols; };
  x.set(row(0) + s.cols / 2, std::numeric_limits<float>::quiet_NaN());
  x.set(row(1) + s.cols - 1, inf);
  for (std::int64_t c = 0; c < s.cols; ++c) x.set(row(2) + c, -inf);
  for (std::int64_t c = 0; c < s.cols; c += 3) x.set(row(3) + c, -inf);
  return x;
}

// NaN rows stay NaN, a +Inf or all -Inf row is NaN (Inf - Inf), -Inf entries are 0 / -Inf:
// exactly where the reference has them, and the finite rows within the usual tolerance.
TEST(SoftmaxSpecialValues, NaNAndInfRowsLikeTheReference) {
  for (const Rows s : {Rows{5, 37}, Rows{6, 9}, Rows{4, 40000}}) {
    for (DType dt : ktest::kAllDTypes) {
      const Buffer x = special_rows(dt, s);
      const std::int64_t n = s.rows * s.cols;
      std::vector<std::int64_t> t = targets_for(s);
      t[3] = 1;  // a -Inf target logit
      const std::vector<float> g(static_cast<std::size_t>(s.rows), 1.0f);
      for (bool log : {false, true}) {
        Buffer want(dt, n), dwant(dt, n);
        ref::softmax(x.data(), dt, s.rows, s.cols, want.data(), dt, log);
        ref::softmax_backward(want.data(), dt, x.data(), dt, s.rows, s.cols, dwant.data(), dt,
                              log);
        for (Isa isa : ktest::isas_to_test()) {
          ktest::IsaCap cap(isa);
          Buffer got(dt, n), dgot(dt, n);
          softmax(x.data(), dt, s.rows, s.cols, got.data(), dt, log);
          const std::string what = label(log ? "log_softmax" : "softmax", dt, dt, s, isa);
          ktest::expect_close(got, want, 1e-6, 8 + sum_rel(s.cols) / ktest::eps(dt), what);
          // The backward of the reference output against dy = x (NaN/Inf in both inputs).
          softmax_backward(want.data(), dt, x.data(), dt, s.rows, s.cols, dgot.data(), dt, log);
          ktest::expect_close(dgot, dwant, 1e-3, 64 + 4 * sum_rel(s.cols) / ktest::eps(dt),
                              what + " backward");
        }
      }
      for (float smoothing : {0.0f, 0.2f}) {
        Buffer lwant(DType::f32, s.rows), dwant(dt, n);
        ref::cross_entropy(x.data(), dt, s.rows, s.cols, t.data(), smoothing,
                           static_cast<float*>(lwant.data()));
        ref::cross_entropy_backward(x.data(), dt, s.rows, s.cols, t.data(), smoothing, g.data(),
                                    dwant.data(), dt);
        for (Isa isa : ktest::isas_to_test()) {
          ktest::IsaCap cap(isa);
          Buffer lgot(DType::f32, s.rows), dgot(dt, n);
          cross_entropy(x.data(), dt, s.rows, s.cols, t.data(), smoothing,
                        static_cast<float*>(lgot.data()));
          cross_entropy_backward(x.data(), dt, s.rows, s.cols, t.data(), smoothing, g.data(),
                                 dgot.data(), dt);
          const std::string what =
              label("cross_entropy", dt, dt, s, isa) + " s=" + std::to_string(smoothing);
          ktest::expect_close(lgot, lwant, 1e-4, 16 + sum_rel(s.cols) / ktest::eps(DType::f32),
                              what);
          ktest::expect_close(dgot, dwant, 1e-6, 8 + sum_rel(s.cols) / ktest::eps(dt),
                              what + " backward");
        }
      }
    }
  }
}

// Logits of +-1e4 and up to the f16 maximum (65504): the max subtraction keeps every exp in
// range, in every dtype and on every target.
TEST(SoftmaxSpecialValues, ExtremeLogitsStayStable) {
  const Rows s{3, 45};
  for (DType dt : ktest::kAllDTypes) {
    Buffer x(dt, s.rows * s.cols);
    std::mt19937 rng(3);
    const float big = 65504.0f;
    for (std::int64_t i = 0; i < s.rows * s.cols; ++i) {
      const unsigned r = rng() % 6;
      x.set(i, r == 0 ? 1e4f : r == 1 ? -1e4f : r == 2 ? big : r == 3 ? -big
                                       : r == 4 ? big - 32.0f : 0.5f * static_cast<float>(rng() % 9));
    }
    const std::vector<std::int64_t> t = targets_for(s);
    const std::vector<float> g(static_cast<std::size_t>(s.rows), 1.0f);
    for (float smoothing : {0.0f, 0.1f, 1.0f}) {
      for (bool log : {false, true}) {
        Buffer want(dt, s.rows * s.cols);
        ref::softmax(x.data(), dt, s.rows, s.cols, want.data(), dt, log);
        Buffer lwant(DType::f32, s.rows), dwant(dt, s.rows * s.cols);
        ref::cross_entropy(x.data(), dt, s.rows, s.cols, t.data(), smoothing,
                           static_cast<float*>(lwant.data()));
        ref::cross_entropy_backward(x.data(), dt, s.rows, s.cols, t.data(), smoothing, g.data(),
                                    dwant.data(), dt);
        for (Isa isa : ktest::isas_to_test()) {
          ktest::IsaCap cap(isa);
          Buffer got(dt, s.rows * s.cols), lgot(DType::f32, s.rows), dgot(dt, s.rows * s.cols);
          softmax(x.data(), dt, s.rows, s.cols, got.data(), dt, log);
          cross_entropy(x.data(), dt, s.rows, s.cols, t.data(), smoothing,
                        static_cast<float*>(lgot.data()));
          cross_entropy_backward(x.data(), dt, s.rows, s.cols, t.data(), smoothing, g.data(),
                                 dgot.data(), dt);
          const std::string what = label(log ? "log_softmax" : "softmax", dt, dt, s, isa) +
                                   " s=" + std::to_string(smoothing);
          // (log-softmax values below -65504 overflow an f16 output, in the reference too.)
          for (std::int64_t i = 0; i < s.rows * s.cols && !(log && dt == DType::f16); ++i) {
            ASSERT_TRUE(std::isfinite(got.get(i))) << what << " at " << i;
          }
          // log-softmax values reach -1.3e5: relative tolerance of the output dtype.
          ktest::expect_close(got, want, atol(dt), 8 + sum_rel(s.cols) / ktest::eps(dt), what);
          ktest::expect_close(lgot, lwant, 1e-3, 64, what + " loss");
          ktest::expect_close(dgot, dwant, atol(dt), 8 + sum_rel(s.cols) / ktest::eps(dt),
                              what + " backward");
        }
      }
    }
  }
}

// Few long rows are split over (row, chunk) tasks, many rows run one per thread; either way the
// chunks and their order are fixed, so the bits do not depend on the thread count.
TEST(SoftmaxDeterminism, ResultsDoNotDependOnThreadCount) {
  const int saved = omp_get_max_threads();
  for (const Rows s : {Rows{1, 100003}, Rows{3, 40000}, Rows{64, 1000}}) {
    const Buffer x = ktest::random_buffer(DType::f32, s.rows * s.cols, -5.0f, 5.0f, 29);
    const std::vector<std::int64_t> t = targets_for(s);
    const std::vector<float> g(static_cast<std::size_t>(s.rows), 1.0f);
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> r(static_cast<std::size_t>(4 * s.rows * s.cols + s.rows));
      float* p = r.data();
      softmax(x.data(), DType::f32, s.rows, s.cols, p, DType::f32, false);
      softmax(x.data(), DType::f32, s.rows, s.cols, p + s.rows * s.cols, DType::f32, true);
      softmax_backward(p, DType::f32, x.data(), DType::f32, s.rows, s.cols,
                       p + 2 * s.rows * s.cols, DType::f32, false);
      cross_entropy_backward(x.data(), DType::f32, s.rows, s.cols, t.data(), 0.1f, g.data(),
                             p + 3 * s.rows * s.cols, DType::f32);
      cross_entropy(x.data(), DType::f32, s.rows, s.cols, t.data(), 0.1f,
                    p + 4 * s.rows * s.cols);
      runs.push_back(std::move(r));
    }
    omp_set_num_threads(saved);
    for (std::size_t k = 1; k < runs.size(); ++k) {
      EXPECT_EQ(std::memcmp(runs[k].data(), runs[0].data(), runs[0].size() * sizeof(float)), 0)
          << s.rows << "x" << s.cols << " differs between 1 and " << k + 1 << " threads";
    }
  }
}

// y and dy of different dtypes (e.g. a bf16 activation with an f32 incoming gradient).
TEST(SoftmaxKernels, BackwardWithMixedDTypes) {
  const Rows s{5, 77};
  const std::int64_t n = s.rows * s.cols;
  for (bool log : {false, true}) {
    for (DType ty : ktest::kAllDTypes) {
      for (DType tg : ktest::kAllDTypes) {
        const Buffer x = ktest::random_buffer(DType::f32, n, -4.0f, 4.0f, 43);
        Buffer y(ty, n);
        ref::softmax(x.data(), DType::f32, s.rows, s.cols, y.data(), ty, log);
        const Buffer dy = ktest::random_buffer(tg, n, -1.0f, 1.0f, 44);
        Buffer want(DType::f32, n);
        ref::softmax_backward(y.data(), ty, dy.data(), tg, s.rows, s.cols, want.data(),
                              DType::f32, log);
        for (Isa isa : ktest::isas_to_test()) {
          ktest::IsaCap cap(isa);
          Buffer got(DType::f32, n);
          softmax_backward(y.data(), ty, dy.data(), tg, s.rows, s.cols, got.data(), DType::f32,
                           log);
          // |dx| error <= (|y| or e^y) * sum|dy...| * rel: bounded by 1e-4 at these sizes.
          ktest::expect_close(got, want, 1e-5, 8, label("softmax_backward", ty, tg, s, isa));
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixprec::kernels
