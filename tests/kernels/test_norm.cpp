// Batch-norm and layer-norm kernels: the dispatcher (AVX-512 rows and scalar rows) against the
// double-accumulating reference in every dtype, plus stability and thread-count invariance.
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
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

// NaN must meet NaN; otherwise |got - want| <= atol + rel * |want|.
void expect_vec_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                      double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      EXPECT_TRUE(std::isnan(want[i]) && std::isnan(got[i]))
          << what << " [" << i << "] got " << got[i] << " want " << want[i];
      continue;
    }
    EXPECT_NEAR(got[i], want[i], atol + rel * std::fabs(want[i])) << what << " [" << i << "]";
  }
}

struct BnCase {
  BatchNormDims d;
  bool training;
  bool affine;
};

// Which backward outputs are wanted (each may be null).
struct Wanted {
  bool dx = true, dweight = true, dbias = true;
};

// kernels::cpu:: (capped at isa) against kernels::ref:: for one case: forward statistics and
// output, then backward from the reference's statistics so only the backward differs.
// nan_at >= 0 plants a NaN in x there: its channel must come out NaN like the reference's.
void check_batch_norm(DType tx, DType ty, DType tdy, const BnCase& bc, Isa isa, Wanted want = {},
                      std::int64_t nan_at = -1) {
  const BatchNormDims d = bc.d;
  const std::int64_t total = d.n * d.c * d.s;
  const std::string what = std::string(name(tx)) + "->" + name(ty) + " dy " + name(tdy) + " " +
                           name(isa) + " n" + std::to_string(d.n) + " c" + std::to_string(d.c) +
                           " s" + std::to_string(d.s) + (bc.training ? " train" : " eval") +
                           (bc.affine ? " affine" : "") + (nan_at >= 0 ? " nan" : "");
  SCOPED_TRACE(what);
  Buffer x = random_buffer(tx, total, -1.5f, 2.5f, 11);
  if (nan_at >= 0) x.set(nan_at, std::numeric_limits<float>::quiet_NaN());
  const Buffer dy = random_buffer(tdy, total, -1.0f, 1.0f, 12);
  const std::vector<float> w = random_vec(d.c, 0.5f, 1.5f, 13), b = random_vec(d.c, -1, 1, 14);
  const float* wp = bc.affine ? w.data() : nullptr;
  const float* bp = bc.affine ? b.data() : nullptr;
  const auto c = static_cast<std::size_t>(d.c);
  std::vector<float> mean_ref = random_vec(d.c, -0.5f, 0.5f, 15);
  std::vector<float> var_ref = random_vec(d.c, 0.5f, 2.0f, 16);
  std::vector<float> mean = mean_ref, var = var_ref;
  Buffer y_ref(ty, total), y(ty, total);
  kernels::ref::batch_norm_forward(x.data(), tx, d, wp, bp, 1e-5f, bc.training, mean_ref.data(),
                                   var_ref.data(), y_ref.data(), ty, nullptr, false);
  {
    IsaCap cap(isa);
    kernels::cpu::batch_norm_forward(x.data(), tx, d, wp, bp, 1e-5f, bc.training, mean.data(),
                                     var.data(), y.data(), ty, nullptr, false);
  }
  expect_vec_close(mean, mean_ref, 1e-5, 1e-6, "mean");
  expect_vec_close(var, var_ref, 1e-5, 1e-6, "var");
  expect_close(y, y_ref, kAtol, kEpsMultiple, "y");

  Buffer dx_ref(ty, total), dx(ty, total);
  std::vector<float> dw_ref(c), db_ref(c), dw(c, -7.0f), db(c, -7.0f);
  kernels::ref::batch_norm_backward(x.data(), tx, dy.data(), tdy, d, mean_ref.data(),
                                    var_ref.data(), 1e-5f, wp, bc.training, dx_ref.data(), ty,
                                    dw_ref.data(), db_ref.data(), nullptr, nullptr);
  {
    IsaCap cap(isa);
    kernels::cpu::batch_norm_backward(x.data(), tx, dy.data(), tdy, d, mean_ref.data(),
                                      var_ref.data(), 1e-5f, wp, bc.training,
                                      want.dx ? dx.data() : nullptr, ty,
                                      want.dweight ? dw.data() : nullptr,
                                      want.dbias ? db.data() : nullptr, nullptr, nullptr);
  }
  if (want.dx) expect_close(dx, dx_ref, kAtol, kEpsMultiple, "dx");
  // Sums of n*s products: f32 partial sums differ from double ones by ~1e-6 of sum |terms|.
  const double sum_atol = 1e-6 * static_cast<double>(d.n * d.s);
  if (want.dweight) expect_vec_close(dw, dw_ref, 1e-5, sum_atol, "dweight");
  else EXPECT_EQ(dw, std::vector<float>(c, -7.0f)) << "dweight written although null";
  if (want.dbias) expect_vec_close(db, db_ref, 1e-5, sum_atol, "dbias");
  else EXPECT_EQ(db, std::vector<float>(c, -7.0f)) << "dbias written although null";
}

// Plane lengths around the vector widths (1..16 lanes) and the per-column path (s < 16).
const std::vector<BnCase> kBnCases = {
    {{4, 3, 35}, true, true},    // rows with a tail
    {{4, 3, 35}, false, true},   // eval: running statistics in, dx = w * invstd * dy
    {{3, 2, 130}, true, false},  // several full 4-vector blocks plus a tail
    {{6, 5, 16}, false, false},  // exactly the row threshold
    {{5, 3, 15}, true, true},    // just below: per-column path with a channel of 15 columns
    {{16, 5, 1}, true, true},    // [N, C]: per-column path
    {{7, 33, 1}, false, true},   // [N, C] with a column tail, eval
    {{9, 4, 3}, true, false},    // short planes
    {{1, 3, 17}, false, true},   // a single sample, eval
    {{8, 8, 64}, true, true},    // above the parallel threshold (channels in parallel)
    {{600, 70, 1}, true, true},  // per-column path in parallel tiles (3 row tasks)
    {{2, 3, 5000}, true, true},  // planes longer than one f32 run (4096)
};

TEST(NormTestKernels, BatchNormMatchesReference) {
  for (Isa isa : isas_to_test()) {
    for (DType dt : kAllDTypes) {
      for (const BnCase& bc : kBnCases) check_batch_norm(dt, dt, dt, bc, isa);
    }
  }
}

TEST(NormTestKernels, BatchNormMixedDTypes) {
  // x, y/dx and dy each in any of the three dtypes, on both paths.
  for (Isa isa : isas_to_test()) {
    for (DType tx : kAllDTypes) {
      for (DType ty : kAllDTypes) {
        for (DType tdy : kAllDTypes) {
          check_batch_norm(tx, ty, tdy, {{3, 2, 37}, true, true}, isa);
          check_batch_norm(tx, ty, tdy, {{11, 6, 2}, true, true}, isa);
        }
      }
    }
  }
}

TEST(NormTestKernels, BatchNormNullGradientsAndNaN) {
  for (Isa isa : isas_to_test()) {
    for (DType dt : kAllDTypes) {
      for (const BnCase& bc : {BnCase{{4, 3, 35}, true, true}, BnCase{{12, 5, 1}, true, false}}) {
        check_batch_norm(dt, dt, dt, bc, isa, {false, true, true});
        check_batch_norm(dt, dt, dt, bc, isa, {true, false, false});
        check_batch_norm(dt, dt, dt, bc, isa, {false, false, true});
        // A NaN in channel 1 (row path) / column 1 (column path) poisons that channel only.
        check_batch_norm(dt, dt, dt, bc, isa, {}, bc.d.s * (bc.d.c + 1) + 2 % bc.d.s);
      }
    }
  }
}

// The fused epilogue (residual add, ReLU) against the same backend's plain batch norm followed
// by the add and the ReLU computed here: bit for bit both ways. Forward: y_fused =
// relu(r(y_plain + residual)); backward: dx, dweight, dbias from the fused call equal the plain
// call's on dy masked where y_fused <= 0, and dresidual is that masked dy.
using BnForward = decltype(&kernels::ref::batch_norm_forward);
using BnBackward = decltype(&kernels::ref::batch_norm_backward);

void check_batch_norm_epilogue(BnForward forward, BnBackward backward, DType t, BatchNormDims d,
                               bool residual, const std::string& what) {
  SCOPED_TRACE(what + " " + name(t) + " n" + std::to_string(d.n) + " c" + std::to_string(d.c) +
               " s" + std::to_string(d.s) + (residual ? " add_relu" : " relu"));
  const std::int64_t total = d.n * d.c * d.s;
  const Buffer x = random_buffer(t, total, -1.5f, 2.5f, 31);
  const Buffer r = random_buffer(t, total, -1.5f, 1.0f, 32);
  const Buffer dy = random_buffer(t, total, -1.0f, 1.0f, 33);
  const std::vector<float> w = random_vec(d.c, 0.5f, 1.5f, 34), b = random_vec(d.c, -1, 1, 35);
  const auto c = static_cast<std::size_t>(d.c);
  std::vector<float> mean(c), var(c), mean2(c), var2(c);
  Buffer plain(t, total), fused(t, total);
  forward(x.data(), t, d, w.data(), b.data(), 1e-5f, true, mean.data(), var.data(), plain.data(),
          t, nullptr, false);
  forward(x.data(), t, d, w.data(), b.data(), 1e-5f, true, mean2.data(), var2.data(),
          fused.data(), t, residual ? r.data() : nullptr, true);
  EXPECT_EQ(mean, mean2);
  EXPECT_EQ(var, var2);
  Buffer want(t, total), masked(t, total);
  std::int64_t cut = 0;
  for (std::int64_t i = 0; i < total; ++i) {
    want.set(i, plain.get(i));
    if (residual) want.set(i, want.get(i) + r.get(i));  // the add, rounded once
    const float v = want.get(i);
    want.set(i, v > 0.0f ? v : 0.0f);
    masked.set(i, v > 0.0f ? dy.get(i) : 0.0f);
    cut += v > 0.0f ? 0 : 1;
  }
  EXPECT_GT(cut, total / 10) << "the ReLU should cut a fair share";
  EXPECT_LT(cut, total - total / 10);
  expect_bitwise(fused, want, "y");

  Buffer dx_plain(t, total), dx_fused(t, total), dres(t, total);
  std::vector<float> dw_plain(c), db_plain(c), dw_fused(c), db_fused(c);
  backward(x.data(), t, masked.data(), t, d, mean.data(), var.data(), 1e-5f, w.data(), true,
           dx_plain.data(), t, dw_plain.data(), db_plain.data(), nullptr, nullptr);
  backward(x.data(), t, dy.data(), t, d, mean.data(), var.data(), 1e-5f, w.data(), true,
           dx_fused.data(), t, dw_fused.data(), db_fused.data(), fused.data(),
           residual ? dres.data() : nullptr);
  expect_bitwise(dx_fused, dx_plain, "dx");
  EXPECT_EQ(dw_fused, dw_plain);
  EXPECT_EQ(db_fused, db_plain);
  if (residual) expect_bitwise(dres, masked, "dresidual");
}

TEST(NormTestKernels, BatchNormEpilogueIsTheAddAndReluAfterIt) {
  // Row path (s >= 16, channels one by one) and per-column path ([N, C] and short planes,
  // which channels-last activations take), each on the reference and on the cpu at every ISA.
  const std::vector<BatchNormDims> dims = {{4, 3, 35}, {8, 8, 64}, {16, 5, 1}, {9, 4, 3},
                                           {600, 70, 1}};
  for (DType t : kAllDTypes) {
    for (const BatchNormDims& d : dims) {
      for (bool residual : {false, true}) {
        check_batch_norm_epilogue(&kernels::ref::batch_norm_forward,
                                  &kernels::ref::batch_norm_backward, t, d, residual, "ref");
        for (Isa isa : isas_to_test()) {
          IsaCap cap(isa);
          check_batch_norm_epilogue(&kernels::cpu::batch_norm_forward,
                                    &kernels::cpu::batch_norm_backward, t, d, residual,
                                    std::string("cpu ") + name(isa));
        }
      }
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
                                   mr.data(), vr.data(), yr.data(), DType::f32, nullptr, false);
  kernels::batch_norm_forward(x.data(), DType::bf16, d, nullptr, nullptr, 1e-5f, true, m.data(),
                              v.data(), y.data(), DType::f32, nullptr, false);
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
                                     mr.data(), vr.data(), yr.data(), DType::f32, nullptr, false);
    kernels::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, 0.0f, true, m.data(),
                                v.data(), y.data(), DType::f32, nullptr, false);
    expect_vec_close(v, vr, 1e-4, 0.0, std::string("var ") + name(isa));
    EXPECT_NEAR(vr[0], 1.0 / 3.0, 0.02);
  }
}

TEST(NormTestKernels, NormsGiveTheSameResultForAnyThreadCount) {
  // Channels, rows and (row block x column chunk) tiles are each reduced by one thread in a
  // fixed order and combined in a fixed order: 1 and 2 threads agree bit for bit.
  for (const BatchNormDims d : {BatchNormDims{8, 8, 32 * 32}, BatchNormDims{700, 60, 1}}) {
    const std::int64_t total = d.n * d.c * d.s;
    const auto c = static_cast<std::size_t>(d.c);
    const Buffer x = random_buffer(DType::f32, total, -1, 1, 41);
    const Buffer dy = random_buffer(DType::f32, total, -1, 1, 42);
    auto run = [&](int threads, Buffer& y, Buffer& dx, std::vector<float>& dw) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      std::vector<float> m(c), v(c), db(c);
      kernels::cpu::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, 1e-5f, true,
                                       m.data(), v.data(), y.data(), DType::f32, nullptr, false);
      kernels::cpu::batch_norm_backward(x.data(), DType::f32, dy.data(), DType::f32, d, m.data(),
                                        v.data(), 1e-5f, nullptr, true, dx.data(), DType::f32,
                                        dw.data(), db.data(), nullptr, nullptr);
      // Layer norm over the same data seen as [n, c * s] rows.
      const std::int64_t rows = d.n, cols = d.c * d.s;
      std::vector<float> lm(static_cast<std::size_t>(rows)), lr(lm.size()),
          ldw(static_cast<std::size_t>(cols)), ldb(ldw.size());
      Buffer ly(DType::f32, total);
      kernels::cpu::layer_norm_forward(x.data(), DType::f32, rows, cols, nullptr, nullptr, 1e-5f,
                                       ly.data(), DType::f32, lm.data(), lr.data());
      kernels::cpu::layer_norm_backward(x.data(), DType::f32, dy.data(), DType::f32, rows, cols,
                                        lm.data(), lr.data(), nullptr, nullptr, DType::f32,
                                        ldw.data(), ldb.data());
      dw.insert(dw.end(), ldw.begin(), ldw.end());
      omp_set_num_threads(saved);
    };
    Buffer y1(DType::f32, total), y2(DType::f32, total), dx1(DType::f32, total),
        dx2(DType::f32, total);
    std::vector<float> dw1(c), dw2(c);
    run(1, y1, dx1, dw1);
    run(2, y2, dx2, dw2);
    expect_bitwise(y2, y1, "y");
    expect_bitwise(dx2, dx1, "dx");
    EXPECT_EQ(dw1, dw2);
  }
}

TEST(NormTestKernels, BatchNormNullOutputsAndBadArgs) {
  const BatchNormDims d{2, 2, 20};
  const Buffer x = random_buffer(DType::f32, 80, -1, 1, 51);
  std::vector<float> m(2), v(2), db(2), db_ref(2);
  Buffer y(DType::f32, 80);
  kernels::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, 1e-5f, true, m.data(),
                              v.data(), y.data(), DType::f32, nullptr, false);
  // Only dbias wanted: no dx / dweight buffers at all.
  kernels::batch_norm_backward(x.data(), DType::f32, x.data(), DType::f32, d, m.data(), v.data(),
                               1e-5f, nullptr, true, nullptr, DType::f32, nullptr, db.data(), nullptr, nullptr);
  kernels::ref::batch_norm_backward(x.data(), DType::f32, x.data(), DType::f32, d, m.data(),
                                    v.data(), 1e-5f, nullptr, true, nullptr, DType::f32, nullptr,
                                    db_ref.data(), nullptr, nullptr);
  expect_vec_close(db, db_ref, 1e-5, 1e-5, "dbias only");
  EXPECT_THROW(kernels::batch_norm_forward(x.data(), DType::f32, {1, 2, 1}, nullptr, nullptr,
                                           1e-5f, true, m.data(), v.data(), y.data(), DType::f32, nullptr, false),
               ValueError);
  EXPECT_THROW(kernels::batch_norm_forward(x.data(), DType::f32, d, nullptr, nullptr, -1.0f,
                                           false, m.data(), v.data(), y.data(), DType::f32, nullptr, false),
               ValueError);
}

// Which layer-norm parameters exist (each may be null).
struct LnCase {
  std::int64_t rows, cols;
  bool weight, bias;
};

void check_layer_norm(DType tx, DType ty, DType tdy, const LnCase& lc, Isa isa, Wanted want = {}) {
  const std::int64_t rows = lc.rows, cols = lc.cols;
  const std::string what = std::string(name(tx)) + "->" + name(ty) + " dy " + name(tdy) + " " +
                           name(isa) + " rows" + std::to_string(rows) + " cols" +
                           std::to_string(cols) + (lc.weight ? " weight" : "") +
                           (lc.bias ? " bias" : "") + (want.dx ? "" : " no-dx") +
                           (want.dweight ? "" : " no-dw") + (want.dbias ? "" : " no-db");
  SCOPED_TRACE(what);
  const std::int64_t total = rows * cols;
  const Buffer x = random_buffer(tx, total, -1.0f, 3.0f, 61);
  const Buffer dy = random_buffer(tdy, total, -1.0f, 1.0f, 62);
  const std::vector<float> w = random_vec(cols, 0.5f, 1.5f, 63), b = random_vec(cols, -1, 1, 64);
  const float* wp = lc.weight ? w.data() : nullptr;
  const float* bp = lc.bias ? b.data() : nullptr;
  const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols);
  std::vector<float> mr(r), sr(r), m(r), s(r);
  Buffer yr(ty, total), y(ty, total);
  kernels::ref::layer_norm_forward(x.data(), tx, rows, cols, wp, bp, 1e-5f, yr.data(), ty,
                                   mr.data(), sr.data());
  {
    IsaCap cap(isa);
    kernels::cpu::layer_norm_forward(x.data(), tx, rows, cols, wp, bp, 1e-5f, y.data(), ty,
                                     m.data(), s.data());
  }
  expect_vec_close(m, mr, 1e-5, 1e-6, "mean");
  expect_vec_close(s, sr, 1e-5, 0.0, "rstd");
  expect_close(y, yr, kAtol, kEpsMultiple, "y");

  Buffer dxr(ty, total), dx(ty, total);
  std::vector<float> dwr(c), dbr(c), dw(c, -7.0f), db(c, -7.0f);
  kernels::ref::layer_norm_backward(x.data(), tx, dy.data(), tdy, rows, cols, mr.data(),
                                    sr.data(), wp, dxr.data(), ty, dwr.data(), dbr.data());
  {
    IsaCap cap(isa);
    kernels::cpu::layer_norm_backward(x.data(), tx, dy.data(), tdy, rows, cols, mr.data(),
                                      sr.data(), wp, want.dx ? dx.data() : nullptr, ty,
                                      want.dweight ? dw.data() : nullptr,
                                      want.dbias ? db.data() : nullptr);
  }
  if (want.dx) expect_close(dx, dxr, kAtol, kEpsMultiple, "dx");
  const double sum_atol = 1e-6 * static_cast<double>(rows);
  if (want.dweight) expect_vec_close(dw, dwr, 1e-5, sum_atol, "dweight");
  else EXPECT_EQ(dw, std::vector<float>(c, -7.0f)) << "dweight written although null";
  if (want.dbias) expect_vec_close(db, dbr, 1e-5, sum_atol, "dbias");
  else EXPECT_EQ(db, std::vector<float>(c, -7.0f)) << "dbias written although null";
}

TEST(NormTestKernels, LayerNormMatchesReference) {
  const std::vector<LnCase> cases = {
      {5, 10, true, true},     // short rows
      {3, 1, true, false},     // one column
      {4, 15, false, true},    // bias only: weight read as ones
      {7, 67, true, true},     // vector body and a tail
      {6, 48, false, false},   // no affine
      {2, 5000, true, true},   // rows longer than one f32 run (4096)
      {300, 130, true, true},  // parallel rows; dweight/dbias over two row tasks
      {3, 0, true, true},      // empty rows: the reference's mean 0, rstd 1/sqrt(eps)
      {0, 9, true, true},
  };
  for (Isa isa : isas_to_test()) {
    for (DType dt : kAllDTypes) {
      for (const LnCase& lc : cases) check_layer_norm(dt, dt, dt, lc, isa);
    }
  }
}

TEST(NormTestKernels, LayerNormMixedDTypesAndNullGradients) {
  for (Isa isa : isas_to_test()) {
    for (DType tx : kAllDTypes) {
      for (DType ty : kAllDTypes) {
        for (DType tdy : kAllDTypes) check_layer_norm(tx, ty, tdy, {5, 37, true, false}, isa);
      }
      check_layer_norm(tx, tx, tx, {9, 41, true, true}, isa, {false, true, true});
      check_layer_norm(tx, tx, tx, {9, 41, false, true}, isa, {true, false, false});
      check_layer_norm(tx, tx, tx, {9, 41, true, false}, isa, {false, false, true});
    }
  }
}

// add_layer_norm_forward is the add (f32 sum rounded once to the sum's dtype) and then the
// layer norm of the stored sum: on each backend, the same bits as that backend's own
// layer_norm_forward of a sum computed apart.
TEST(NormTestKernels, AddLayerNormIsTheAddThenTheNorm) {
  struct Types {
    DType x, delta, sum, y;
  };
  const std::vector<Types> types = {
      {DType::f32, DType::bf16, DType::f32, DType::bf16},  // a transformer's f32 residual stream
      {DType::f32, DType::f16, DType::f32, DType::f16},
      {DType::bf16, DType::bf16, DType::bf16, DType::bf16},
      {DType::f16, DType::f16, DType::f16, DType::f32},
      {DType::f32, DType::f32, DType::f32, DType::f32},
      {DType::bf16, DType::f16, DType::f32, DType::bf16},
  };
  const std::vector<LnCase> cases = {
      {5, 37, true, true}, {2, 5000, true, true}, {300, 130, true, false}, {4, 15, false, false},
      {3, 0, true, true}, {0, 9, true, true}};
  using NormFn = decltype(&kernels::ref::layer_norm_forward);
  using FusedFn = decltype(&kernels::ref::add_layer_norm_forward);
  struct Side {
    const char* name;
    NormFn norm;
    FusedFn fused;
  };
  const Side sides[] = {
      {"ref", &kernels::ref::layer_norm_forward, &kernels::ref::add_layer_norm_forward},
      {"cpu", &kernels::cpu::layer_norm_forward, &kernels::cpu::add_layer_norm_forward}};
  for (Isa isa : isas_to_test()) {
    IsaCap cap(isa);
    for (const Side& side : sides) {
      for (const Types& t : types) {
        for (const LnCase& lc : cases) {
          const std::int64_t rows = lc.rows, cols = lc.cols, n = rows * cols;
          SCOPED_TRACE(std::string(side.name) + " " + name(isa) + " " + name(t.x) + "+" +
                       name(t.delta) + "->" + name(t.sum) + "," + name(t.y) + " rows" +
                       std::to_string(rows) + " cols" + std::to_string(cols));
          // Deltas of the size of x: the sum rounds in the last bits of every dtype.
          const Buffer x = random_buffer(t.x, n, -2.0f, 3.0f, 71);
          const Buffer delta = random_buffer(t.delta, n, -3.0f, 2.0f, 72);
          const std::vector<float> w = random_vec(cols, 0.5f, 1.5f, 73);
          const std::vector<float> b = random_vec(cols, -1.0f, 1.0f, 74);
          const float* wp = lc.weight ? w.data() : nullptr;
          const float* bp = lc.bias ? b.data() : nullptr;
          Buffer want_sum(t.sum, n);
          for (std::int64_t i = 0; i < n; ++i) want_sum.set(i, x.get(i) + delta.get(i));
          Buffer want_y(t.y, n), sum(t.sum, n), y(t.y, n);
          Buffer want_mean(DType::f32, rows), want_rstd(DType::f32, rows);
          Buffer mean(DType::f32, rows), rstd(DType::f32, rows);
          side.norm(want_sum.data(), t.sum, rows, cols, wp, bp, 1e-5f, want_y.data(), t.y,
                    static_cast<float*>(want_mean.data()), static_cast<float*>(want_rstd.data()));
          side.fused(x.data(), t.x, delta.data(), t.delta, rows, cols, wp, bp, 1e-5f, sum.data(),
                     t.sum, y.data(), t.y, static_cast<float*>(mean.data()),
                     static_cast<float*>(rstd.data()));
          expect_bitwise(sum, want_sum, "sum");
          expect_bitwise(y, want_y, "y");
          expect_bitwise(mean, want_mean, "mean");
          expect_bitwise(rstd, want_rstd, "rstd");
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixprec::ktest
