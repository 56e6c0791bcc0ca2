// Batch-norm and layer-norm kernels: the dispatcher (AVX-512 rows and scalar rows) against the
// double-accumulating reference in every dtype, plus stability and thread-count invariance.
#include <omp.h>

#include <vector>

#include "kernel_test_util.h"
#include "kernels/norm.h"

namespace mixprec::ktest {
namespace {

using kernels::BatchNormDims;

// Both sides compute in f32 from the same stored inputs and differ only in f32 summation order
// (about 1e-6 relative); a 16-bit output can then round to neighbouring values, so the bound is
// 2 eps(dtype) relative (one rounding step either way, eps = 2u) plus an f32-level atol.
constexpr double kAtol = 2e-5;
constexpr double kEpsMultiple = 2.0;

std::vector<float> random_vec(std::int64_t n, float lo, float hi, std::uint32_t seed) {
  const Buffer b = random_buffer(DType::f32, n, lo, hi, seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = b.get(i);
  return v;
}

void expect_vec_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                      double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rel * std::fabs(want[i])) << what << " [" << i << "]";
  }
}

struct BnCase {
  BatchNormDims d;
  bool training;
  bool affine;
};

void check_batch_norm(DType dt, const BnCase& bc, Isa isa) {
  const BatchNormDims d = bc.d;
  const std::int64_t total = d.n * d.c * d.s;
  const std::string what = std::string(name(dt)) + " " + name(isa) + " n" + std::to_string(d.n) +
                           " c" + std::to_string(d.c) + " s" + std::to_string(d.s) +
                           (bc.training ? " train" : " eval") + (bc.affine ? " affine" : "");
  const Buffer x = random_buffer(dt, total, -1.5f, 2.5f, 11);
  const Buffer dy = random_buffer(dt, total, -1.0f, 1.0f, 12);
  const std::vector<float> w = random_vec(d.c, 0.5f, 1.5f, 13), b = random_vec(d.c, -1, 1, 14);
  const float* wp = bc.affine ? w.data() : nullptr;
  const float* bp = bc.affine ? b.data() : nullptr;
  const auto c = static_cast<std::size_t>(d.c);
  std::vector<float> mean_ref = random_vec(d.c, -0.5f, 0.5f, 15);
  std::vector<float> var_ref = random_vec(d.c, 0.5f, 2.0f, 16);
  std::vector<float> mean = mean_ref, var = var_ref;
  Buffer y_ref(dt, total), y(dt, total);
  kernels::ref::batch_norm_forward(x.data(), dt, d, wp, bp, 1e-5f, bc.training, mean_ref.data(),
                                   var_ref.data(), y_ref.data(), dt);
  {
    IsaCap cap(isa);
    kernels::batch_norm_forward(x.data(), dt, d, wp, bp, 1e-5f, bc.training, mean.data(),
                                var.data(), y.data(), dt);
  }
  expect_vec_close(mean, mean_ref, 1e-5, 1e-6, what + " mean");
  expect_vec_close(var, var_ref, 1e-5, 1e-6, what + " var");
  expect_close(y, y_ref, kAtol, kEpsMultiple, what + " y");

  // Backward from the reference's statistics, so only the backward differs.
  Buffer dx_ref(dt, total), dx(dt, total);
  std::vector<float> dw_ref(c), db_ref(c), dw(c), db(c);
  kernels::ref::batch_norm_backward(x.data(), dt, dy.data(), dt, d, mean_ref.data(),
                                    var_ref.data(), 1e-5f, wp, bc.training, dx_ref.data(), dt,
                                    dw_ref.data(), db_ref.data());
  {
    IsaCap cap(isa);
    kernels::batch_norm_backward(x.data(), dt, dy.data(), dt, d, mean_ref.data(), var_ref.data(),
                                 1e-5f, wp, bc.training, dx.data(), dt, dw.data(), db.data());
  }
  expect_close(dx, dx_ref, kAtol, kEpsMultiple, what + " dx");
  // Sums of n*s products: f32 row sums differ from double ones by ~1e-6 of sum |terms|.
  const double sum_atol = 1e-6 * static_cast<double>(d.n * d.s);
  expect_vec_close(dw, dw_ref, 1e-5, sum_atol, what + " dweight");
  expect_vec_close(db, db_ref, 1e-5, sum_atol, what + " dbias");
}

TEST(NormTestKernels, BatchNormMatchesReference) {
  const std::vector<BnCase> cases = {
      {{4, 3, 35}, true, true},    // rows with a 3-lane tail
      {{4, 3, 35}, false, true},
      {{3, 2, 130}, true, false},  // several full 64-value blocks plus a tail
      {{6, 5, 16}, false, false},
      {{16, 5, 1}, true, true},    // [N, C]: short rows go to the reference
      {{8, 8, 64}, true, true},    // above the parallel threshold
  };
  for (Isa isa : isas_to_test()) {
    for (DType dt : kAllDTypes) {
      for (const BnCase& bc : cases) check_batch_norm(dt, bc, isa);
    }
  }
}

TEST(NormTestKernels, BatchNormBf16InputF32Output) {
  // x in bf16, y and dx in f32: the vector rows cover an f32 output directly.
  const BatchNormDims d{4, 2, 40};
  const std::int64_t total = d.n * d.c * d.s;
  const Buffer x = random_buffer(DType::bf16, total, -2, 2, 21);
  std::vector<float> m(2), v(2), mr(2), vr(2);
  Buffer y(DType::f32, total), yr(DType::f32, total);
  kernels::ref::batch_norm_forward(x.data(), DType::bf16, d, nullptr, nullptr, 1e-5f, true,
                                   mr.data(), vr.data(), yr.data(), DType::f32);
  kernels::batch_norm_forward(x.data(), DType::bf16, d, nullptr, nullptr, 1e-5f, true, m.data(),
                              v.data(), y.data(), DType::f32);
  expect_close(y, yr, kAtol, kEpsMultiple, "bf16->f32 y");
}

TEST(NormTestKernels, BatchNormVarianceStableForLargeMean) {
  // Values 1000 + U(-1, 1): E[x^2] - E[x]^2 in f32 would lose every digit of the variance
  // (1e6 * 2^-24 ~ 0.06 against a variance of 1/3); the two-pass variance keeps ~6 digits.
  const BatchNormDims d{8, 2, 256};
  const std::int64_t total = d.n * d.c * d.s;
  Buffer x = random_buffer(DType::f32, total, -1.0f, 1.0f, 31);
  for (std::int64_t i = 0; i < total; ++i) x.set(i, x.get(i) + 1000.0f);
  for (Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    std::vector<float> m(2), v(2), mr(2), vr(2);
    Buffer y(DType::f32, total), yr(DType::f32, total);
    kernels::ref::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, 0.0f, true,
                                     mr.data(), vr.data(), yr.data(), DType::f32);
    kernels::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, 0.0f, true, m.data(),
                                v.data(), y.data(), DType::f32);
    expect_vec_close(v, vr, 1e-4, 0.0, std::string("var ") + name(isa));
    EXPECT_NEAR(vr[0], 1.0 / 3.0, 0.02);
  }
}

TEST(NormTestKernels, BatchNormSameResultForAnyThreadCount) {
  // Each channel is reduced by one thread in a fixed order: 1 and 2 threads agree bit for bit.
  const BatchNormDims d{8, 8, 32 * 32};
  const std::int64_t total = d.n * d.c * d.s;
  const Buffer x = random_buffer(DType::f32, total, -1, 1, 41);
  const Buffer dy = random_buffer(DType::f32, total, -1, 1, 42);
  auto run = [&](int threads, Buffer& y, Buffer& dx, std::vector<float>& dw) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> m(8), v(8), db(8);
    kernels::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, 1e-5f, true, m.data(),
                                v.data(), y.data(), DType::f32);
    kernels::batch_norm_backward(x.data(), DType::f32, dy.data(), DType::f32, d, m.data(),
                                 v.data(), 1e-5f, nullptr, true, dx.data(), DType::f32, dw.data(),
                                 db.data());
    omp_set_num_threads(saved);
  };
  Buffer y1(DType::f32, total), y2(DType::f32, total), dx1(DType::f32, total),
      dx2(DType::f32, total);
  std::vector<float> dw1(8), dw2(8);
  run(1, y1, dx1, dw1);
  run(2, y2, dx2, dw2);
  expect_bitwise(y2, y1, "y");
  expect_bitwise(dx2, dx1, "dx");
  EXPECT_EQ(dw1, dw2);
}

TEST(NormTestKernels, BatchNormNullOutputsAndBadArgs) {
  const BatchNormDims d{2, 2, 20};
  const Buffer x = random_buffer(DType::f32, 80, -1, 1, 51);
  std::vector<float> m(2), v(2), db(2), db_ref(2);
  Buffer y(DType::f32, 80);
  kernels::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, 1e-5f, true, m.data(),
                              v.data(), y.data(), DType::f32);
  // Only dbias wanted: no dx / dweight buffers at all.
  kernels::batch_norm_backward(x.data(), DType::f32, x.data(), DType::f32, d, m.data(), v.data(),
                               1e-5f, nullptr, true, nullptr, DType::f32, nullptr, db.data());
  kernels::ref::batch_norm_backward(x.data(), DType::f32, x.data(), DType::f32, d, m.data(),
                                    v.data(), 1e-5f, nullptr, true, nullptr, DType::f32, nullptr,
                                    db_ref.data());
  expect_vec_close(db, db_ref, 1e-5, 1e-5, "dbias only");
  EXPECT_THROW(kernels::batch_norm_forward(x.data(), DType::f32, {1, 2, 1}, nullptr, nullptr,
                                           1e-5f, true, m.data(), v.data(), y.data(), DType::f32),
               ValueError);
  EXPECT_THROW(kernels::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, -1.0f,
                                           false, m.data(), v.data(), y.data(), DType::f32),
               ValueError);
}

void check_layer_norm(DType dt, std::int64_t rows, std::int64_t cols, bool affine, Isa isa) {
  const std::string what = std::string(name(dt)) + " " + name(isa) + " rows" +
                           std::to_string(rows) + " cols" + std::to_string(cols) +
                           (affine ? " affine" : "");
  const std::int64_t total = rows * cols;
  const Buffer x = random_buffer(dt, total, -1.0f, 3.0f, 61);
  const Buffer dy = random_buffer(dt, total, -1.0f, 1.0f, 62);
  const std::vector<float> w = random_vec(cols, 0.5f, 1.5f, 63), b = random_vec(cols, -1, 1, 64);
  const float* wp = affine ? w.data() : nullptr;
  const float* bp = affine ? b.data() : nullptr;
  const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols);
  std::vector<float> mr(r), sr(r), m(r), s(r);
  Buffer yr(dt, total), y(dt, total);
  kernels::ref::layer_norm_forward(x.data(), dt, rows, cols, wp, bp, 1e-5f, yr.data(), dt,
                                   mr.data(), sr.data());
  {
    IsaCap cap(isa);
    kernels::layer_norm_forward(x.data(), dt, rows, cols, wp, bp, 1e-5f, y.data(), dt, m.data(),
                                s.data());
  }
  expect_vec_close(m, mr, 1e-5, 1e-6, what + " mean");
  expect_vec_close(s, sr, 1e-5, 0.0, what + " rstd");
  expect_close(y, yr, kAtol, kEpsMultiple, what + " y");

  Buffer dxr(dt, total), dx(dt, total);
  std::vector<float> dwr(c), dbr(c), dw(c), db(c);
  kernels::ref::layer_norm_backward(x.data(), dt, dy.data(), dt, rows, cols, mr.data(), sr.data(),
                                    wp, dxr.data(), dt, dwr.data(), dbr.data());
  {
    IsaCap cap(isa);
    kernels::layer_norm_backward(x.data(), dt, dy.data(), dt, rows, cols, mr.data(), sr.data(),
                                 wp, dx.data(), dt, dw.data(), db.data());
  }
  expect_close(dx, dxr, kAtol, kEpsMultiple, what + " dx");
  expect_vec_close(dw, dwr, 1e-5, 1e-6 * static_cast<double>(rows), what + " dweight");
  expect_vec_close(db, dbr, 1e-5, 1e-6 * static_cast<double>(rows), what + " dbias");
}

TEST(NormTestKernels, LayerNormMatchesReference) {
  for (Isa isa : isas_to_test()) {
    for (DType dt : kAllDTypes) {
      check_layer_norm(dt, 5, 10, true, isa);     // short rows: reference path
      check_layer_norm(dt, 7, 67, true, isa);     // vector stats with a tail
      check_layer_norm(dt, 6, 48, false, isa);    // no affine: vector apply
      check_layer_norm(dt, 300, 130, true, isa);  // parallel rows and column blocks
    }
  }
}

}  // namespace
}  // namespace mixprec::ktest
