#pragma once
// The double-precision GEMM reference of the fp8 GEMM tests (test_fp8_matmul.cpp,
// test_fp8_linear.cpp) and the bound an f32-accumulated result must meet against it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mixprec::test {

/// gamma_k = k u / (1 - k u) for f32 (u = 2^-24): the bound on the relative error of a k-term
/// f32 dot product relative to sum |a_i b_i| (Higham 3.1), whatever the summation order.
inline double gamma_f32(std::int64_t k) {
  const double u = std::ldexp(1.0, -24);
  return static_cast<double>(k) * u / (1.0 - static_cast<double>(k) * u);
}

/// Row-major double matmul of a [m, k] and b [k, n] given as values (float or double); also
/// sum |a||b|.
template <class T>
void ref_matmul(const std::vector<T>& a, const std::vector<T>& b, std::int64_t m, std::int64_t k,
                std::int64_t n, std::vector<double>& y, std::vector<double>& absy) {
  y.assign(static_cast<std::size_t>(m * n), 0.0);
  absy.assign(y.size(), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0, sa = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = a[static_cast<std::size_t>(i * k + p)];
        const double w = b[static_cast<std::size_t>(p * n + j)];
        s += x * w;
        sa += std::fabs(x * w);
      }
      y[static_cast<std::size_t>(i * n + j)] = s;
      absy[static_cast<std::size_t>(i * n + j)] = sa;
    }
  }
}

/// |got - ref| <= gamma_k(f32) * sum |a||b| (+ a denormal-sized slack) for every element.
inline void expect_f32_accumulation(const std::vector<float>& got, const std::vector<double>& ref,
                                    const std::vector<double>& absy, std::int64_t k,
                                    const std::string& where) {
  ASSERT_EQ(got.size(), ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = gamma_f32(k) * absy[i] + 1e-30;
    EXPECT_LE(std::fabs(static_cast<double>(got[i]) - ref[i]), tol)
        << where << " element " << i << ": got " << got[i] << " want " << ref[i];
  }
}

}  // namespace mixprec::test
