// The batch-norm kernels split into reductions and element-wise passes (batch_norm_stats,
// batch_norm_backward_reduce, batch_norm_backward_elemt; used by ops::sync_batch_norm): the cpu
// dispatcher against the reference on every ISA and dtype, the split backward equal to the fused
// one bit for bit on both backends, the statistics against the fused forward's, and thread-count
// invariance.
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/norm.h"
#include "kernels/spec/norm_math.h"

namespace mixprec::ktest {
namespace {

using kernels::BatchNormDims;

struct SplitCase {
  BatchNormDims d;
  float offset;  // added to x: a mean far from 0 against a spread of ~1
};

// The per-row (s >= 16) and per-column (s < 16, [N, C]) paths, a tail, runs longer than one f32
// run, the parallel paths, a single value, an empty batch and a large mean.
const std::vector<SplitCase> kCases = {
    {{4, 3, 35}, 0.0f},  {{5, 3, 15}, 0.0f}, {{16, 5, 1}, 0.0f},   {{2, 3, 5000}, 0.0f},
    {{8, 8, 64}, 0.0f},  {{600, 70, 1}, 0.0f}, {{1, 3, 1}, 0.0f},  {{0, 4, 20}, 0.0f},
    {{8, 2, 256}, 1000.0f}, {{40, 3, 2}, 1000.0f},
};

std::string label(const SplitCase& sc, DType t, Isa isa) {
  return std::string(name(t)) + " " + name(isa) + " n" + std::to_string(sc.d.n) + " c" +
         std::to_string(sc.d.c) + " s" + std::to_string(sc.d.s) +
         (sc.offset != 0.0f ? " offset" : "");
}

Buffer make_x(const SplitCase& sc, DType t) {
  const std::int64_t total = sc.d.n * sc.d.c * sc.d.s;
  Buffer x = random_buffer(t, total, -1.5f, 2.5f, 51);
  for (std::int64_t i = 0; i < total; ++i) x.set(i, x.get(i) + sc.offset);
  return x;
}

void expect_doubles_close(const std::vector<double>& got, const std::vector<double>& want,
                          double rel, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rel * std::fabs(want[i])) << what << " [" << i << "]";
  }
}

TEST(NormSplitKernels, StatsMatchTheReference) {
  for (Isa isa : isas_to_test()) {
    for (DType t : kAllDTypes) {
      for (const SplitCase& sc : kCases) {
        SCOPED_TRACE(label(sc, t, isa));
        const auto c = static_cast<std::size_t>(sc.d.c);
        const Buffer x = make_x(sc, t);
        std::vector<double> mr(c), m2r(c), m(c, -7.0), m2(c, -7.0);
        kernels::ref::batch_norm_stats(x.data(), t, sc.d, mr.data(), m2r.data());
        {
          IsaCap cap(isa);
          kernels::cpu::batch_norm_stats(x.data(), t, sc.d, m.data(), m2.data());
        }
        // f32 runs against double sums: a few f32 roundings of the mean's size; m2 is computed
        // around the f32 mean and corrected exactly, so it keeps ~6 digits even at offset 1000.
        expect_doubles_close(m, mr, 1e-6, 1e-6, "mean");
        const double count = static_cast<double>(sc.d.n * sc.d.s);
        expect_doubles_close(m2, m2r, 1e-5, 1e-6 * count, "m2");
        if (count == 0) {
          EXPECT_EQ(m, std::vector<double>(c, 0.0));
          EXPECT_EQ(m2, std::vector<double>(c, 0.0));
        }
      }
    }
  }
}

TEST(NormSplitKernels, NaNPoisonsItsChannelsMoments) {
  for (Isa isa : isas_to_test()) {
    for (const SplitCase& sc : {SplitCase{{4, 3, 35}, 0.0f}, SplitCase{{12, 3, 1}, 0.0f}}) {
      SCOPED_TRACE(label(sc, DType::f32, isa));
      Buffer x = make_x(sc, DType::f32);
      x.set(sc.d.s * (sc.d.c + 1) + 2 % sc.d.s, std::nanf(""));  // sample 1, channel 1
      std::vector<double> mr(3), m2r(3), m(3), m2(3);
      kernels::ref::batch_norm_stats(x.data(), DType::f32, sc.d, mr.data(), m2r.data());
      {
        IsaCap cap(isa);
        kernels::cpu::batch_norm_stats(x.data(), DType::f32, sc.d, m.data(), m2.data());
      }
      for (const std::vector<double>* v : {&mr, &m2r, &m, &m2}) {
        EXPECT_FALSE(std::isnan((*v)[0]));
        EXPECT_TRUE(std::isnan((*v)[1]));
        EXPECT_FALSE(std::isnan((*v)[2]));
      }
    }
  }
}

TEST(NormSplitKernels, StatsAgreeWithTheFusedForward) {
  // The fused forward rounds the same double sum to its f32 mean (bit for bit) and divides the
  // squared deviations from that f32 mean by the count (within f32 roundings of m2 / count).
  for (bool ref : {true, false}) {
    for (DType t : kAllDTypes) {
      for (const SplitCase& sc : kCases) {
        if (sc.d.n * sc.d.s < 2) continue;  // the fused forward needs two values in training
        SCOPED_TRACE(label(sc, t, Isa::scalar) + (ref ? " ref" : " cpu"));
        const auto c = static_cast<std::size_t>(sc.d.c);
        const std::int64_t total = sc.d.n * sc.d.c * sc.d.s;
        const Buffer x = make_x(sc, t);
        std::vector<double> m(c), m2(c);
        std::vector<float> fm(c), fv(c);
        Buffer y(t, total);
        if (ref) {
          kernels::ref::batch_norm_stats(x.data(), t, sc.d, m.data(), m2.data());
          kernels::ref::batch_norm_forward(x.data(), t, sc.d, nullptr, nullptr, 1e-5f, true,
                                           fm.data(), fv.data(), y.data(), t, nullptr, false);
        } else {
          kernels::cpu::batch_norm_stats(x.data(), t, sc.d, m.data(), m2.data());
          kernels::cpu::batch_norm_forward(x.data(), t, sc.d, nullptr, nullptr, 1e-5f, true,
                                           fm.data(), fv.data(), y.data(), t, nullptr, false);
        }
        const double count = static_cast<double>(sc.d.n * sc.d.s);
        for (std::size_t i = 0; i < c; ++i) {
          EXPECT_EQ(static_cast<float>(m[i]), fm[i]) << "mean [" << i << "]";
          EXPECT_NEAR(m2[i] / count, fv[i], 1e-6 * fv[i] + 1e-9) << "var [" << i << "]";
        }
      }
    }
  }
}

/// Runs the split backward (reduce, then elemt with this batch's own sums and count) and the
/// fused training backward on one backend; the results must be the same bits.
void check_split_equals_fused(bool ref, DType tx, DType tdy, const SplitCase& sc) {
  const BatchNormDims d = sc.d;
  const auto c = static_cast<std::size_t>(d.c);
  const std::int64_t total = d.n * d.c * d.s;
  const Buffer x = make_x(sc, tx);
  const Buffer dy = random_buffer(tdy, total, -1.0f, 1.0f, 52);
  std::vector<float> w(c), mean(c), var(c);
  for (std::size_t i = 0; i < c; ++i) {
    w[i] = 0.5f + 0.25f * static_cast<float>(i);
    mean[i] = sc.offset + 0.1f * static_cast<float>(i);
    var[i] = 0.75f + 0.5f * static_cast<float>(i);
  }
  const double count = static_cast<double>(d.n * d.s);
  Buffer dx_fused(tx, total), dx_split(tx, total);
  std::vector<float> dw(c), db(c);
  std::vector<double> sum_dy(c), sum_dy_xmu(c);
  const auto fused = ref ? &kernels::ref::batch_norm_backward : &kernels::cpu::batch_norm_backward;
  const auto reduce = ref ? &kernels::ref::batch_norm_backward_reduce
                          : &kernels::cpu::batch_norm_backward_reduce;
  const auto elemt = ref ? &kernels::ref::batch_norm_backward_elemt
                         : &kernels::cpu::batch_norm_backward_elemt;
  fused(x.data(), tx, dy.data(), tdy, d, mean.data(), var.data(), 1e-5f, w.data(), true,
        dx_fused.data(), tx, dw.data(), db.data(), nullptr, nullptr);
  reduce(x.data(), tx, dy.data(), tdy, d, mean.data(), sum_dy.data(), sum_dy_xmu.data());
  elemt(x.data(), tx, dy.data(), tdy, d, mean.data(), var.data(), 1e-5f, w.data(), sum_dy.data(),
        sum_dy_xmu.data(), count, dx_split.data(), tx);
  expect_bitwise(dx_split, dx_fused, "dx");
  for (std::size_t i = 0; i < c; ++i) {
    EXPECT_EQ(static_cast<float>(sum_dy[i]), db[i]) << "sum dy [" << i << "]";
    EXPECT_EQ(static_cast<float>(sum_dy_xmu[i]) * kernels::norm_invstd(var[i], 1e-5f), dw[i])
        << "sum dy * (x - mean) [" << i << "]";
  }
}

TEST(NormSplitKernels, ReduceThenElemtIsTheFusedBackwardBitForBit) {
  for (const SplitCase& sc : kCases) {
    if (sc.d.n * sc.d.s < 2) continue;
    for (DType tx : kAllDTypes) {
      for (DType tdy : kAllDTypes) {
        SCOPED_TRACE(label(sc, tx, Isa::scalar) + " dy " + name(tdy) + " ref");
        check_split_equals_fused(true, tx, tdy, sc);
      }
    }
    for (Isa isa : isas_to_test()) {
      IsaCap cap(isa);
      for (DType t : kAllDTypes) {
        SCOPED_TRACE(label(sc, t, isa) + " cpu");
        check_split_equals_fused(false, t, t, sc);
      }
    }
  }
}

TEST(NormSplitKernels, ReduceAndElemtMatchTheReference) {
  // Sums and a count from elsewhere (other ranks): elemt must apply them, not recompute them.
  for (Isa isa : isas_to_test()) {
    for (DType t : kAllDTypes) {
      for (const SplitCase& sc : kCases) {
        SCOPED_TRACE(label(sc, t, isa));
        const BatchNormDims d = sc.d;
        const auto c = static_cast<std::size_t>(d.c);
        const std::int64_t total = d.n * d.c * d.s;
        const Buffer x = make_x(sc, t);
        const Buffer dy = random_buffer(t, total, -1.0f, 1.0f, 53);
        std::vector<float> w(c, 1.25f), mean(c, sc.offset + 0.25f), var(c, 1.5f);
        std::vector<double> a_ref(c), b_ref(c), a(c), b(c);
        kernels::ref::batch_norm_backward_reduce(x.data(), t, dy.data(), t, d, mean.data(),
                                                 a_ref.data(), b_ref.data());
        std::vector<double> other_dy(c), other_dy_xmu(c);
        for (std::size_t i = 0; i < c; ++i) {
          other_dy[i] = 3.0 * static_cast<double>(i) - 2.0;
          other_dy_xmu[i] = 0.5 - static_cast<double>(i);
        }
        const double count = 3.0 * static_cast<double>(d.n * d.s) + 7.0;
        Buffer dx_ref(t, total), dx(t, total);
        kernels::ref::batch_norm_backward_elemt(x.data(), t, dy.data(), t, d, mean.data(),
                                                var.data(), 1e-5f, w.data(), other_dy.data(),
                                                other_dy_xmu.data(), count, dx_ref.data(), t);
        {
          IsaCap cap(isa);
          kernels::cpu::batch_norm_backward_reduce(x.data(), t, dy.data(), t, d, mean.data(),
                                                   a.data(), b.data());
          kernels::cpu::batch_norm_backward_elemt(x.data(), t, dy.data(), t, d, mean.data(),
                                                  var.data(), 1e-5f, w.data(), other_dy.data(),
                                                  other_dy_xmu.data(), count, dx.data(), t);
        }
        // f32 runs against double sums: ~1e-6 of sum |terms| (|x - mean| <~ 2).
        const double sum_atol = 2e-6 * static_cast<double>(d.n * d.s);
        expect_doubles_close(a, a_ref, 1e-6, sum_atol, "sum dy");
        expect_doubles_close(b, b_ref, 1e-6, sum_atol, "sum dy * (x - mean)");
        expect_close(dx, dx_ref, 2e-5, 2.0, "dx");
      }
    }
  }
}

TEST(NormSplitKernels, SameResultForAnyThreadCount) {
  for (const BatchNormDims d : {BatchNormDims{8, 8, 32 * 32}, BatchNormDims{700, 60, 1}}) {
    const auto c = static_cast<std::size_t>(d.c);
    const std::int64_t total = d.n * d.c * d.s;
    const Buffer x = random_buffer(DType::f32, total, -1, 1, 54);
    const Buffer dy = random_buffer(DType::f32, total, -1, 1, 55);
    const std::vector<float> mean(c, 0.125f), var(c, 0.5f);
    auto run = [&](int threads, std::vector<double>& out, Buffer& dx) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      std::vector<double> m(c), m2(c), a(c), b(c);
      kernels::cpu::batch_norm_stats(x.data(), DType::f32, d, m.data(), m2.data());
      kernels::cpu::batch_norm_backward_reduce(x.data(), DType::f32, dy.data(), DType::f32, d,
                                               mean.data(), a.data(), b.data());
      kernels::cpu::batch_norm_backward_elemt(x.data(), DType::f32, dy.data(), DType::f32, d,
                                              mean.data(), var.data(), 1e-5f, nullptr, a.data(),
                                              b.data(), 2.0 * static_cast<double>(d.n * d.s),
                                              dx.data(), DType::f32);
      for (const std::vector<double>* v : {&m, &m2, &a, &b}) out.insert(out.end(), v->begin(), v->end());
      omp_set_num_threads(saved);
    };
    std::vector<double> one, two;
    Buffer dx1(DType::f32, total), dx2(DType::f32, total);
    run(1, one, dx1);
    run(2, two, dx2);
    EXPECT_EQ(one, two);
    expect_bitwise(dx2, dx1, "dx");
  }
}

}  // namespace
}  // namespace mixprec::ktest
