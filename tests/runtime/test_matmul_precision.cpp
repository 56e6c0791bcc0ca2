#include <gtest/gtest.h>

#include "cpu_class_expect.h"
#include "kernels/matmul.h"
#include "mixprec/mixprec.h"

namespace mixprec::runtime {
namespace {

// A x B where every input is 1 + 2^-10: exact in f32, rounded to 1 in bf16. The f32 product sum
// over k = 64 is 64 * (1 + 2^-10)^2; with bf16-rounded inputs it would be exactly 64.
Tensor probe() {
  const float v = 1.0f + 1.0f / 1024;
  return matmul(Tensor::full({4, 64}, v), Tensor::full({64, 4}, v));
}

TEST(MatmulPrecision, DefaultIsHighestAndGuardsNest) {
  EXPECT_EQ(matmul_precision(), MatmulPrecision::highest);
  {
    MatmulPrecisionGuard medium(MatmulPrecision::medium);
    EXPECT_EQ(matmul_precision(), MatmulPrecision::medium);
    {
      MatmulPrecisionGuard highest(MatmulPrecision::highest);
      EXPECT_EQ(matmul_precision(), MatmulPrecision::highest);
    }
    EXPECT_EQ(matmul_precision(), MatmulPrecision::medium);
  }
  EXPECT_EQ(matmul_precision(), MatmulPrecision::highest);
  set_matmul_precision(MatmulPrecision::medium);
  EXPECT_EQ(matmul_precision(), MatmulPrecision::medium);
  set_matmul_precision(MatmulPrecision::highest);
  EXPECT_EQ(parse_matmul_precision("medium"), MatmulPrecision::medium);
  EXPECT_EQ(parse_matmul_precision("high"), MatmulPrecision::high);
  EXPECT_STREQ(name(MatmulPrecision::high), "high");
  EXPECT_THROW(parse_matmul_precision("tf32"), ValueError);
}

TEST(MatmulPrecision, HighIsHighestOnACpu) {
  // TF32 exists on GPUs only: a CPU GEMM under "high" computes true f32 products.
  const std::vector<float> highest = probe().to_vector();
  MatmulPrecisionGuard high(MatmulPrecision::high);
  EXPECT_EQ(probe().to_vector(), highest);
}

TEST(MatmulPrecision, HighestIsTrueF32) {
  const double v = 1.0 + 1.0 / 1024;
  // Within f32 summation error of 64 terms; far closer than the bf16 answer 64.
  for (float y : probe().to_vector()) EXPECT_NEAR(y, 64 * v * v, 64 * 64 * 6e-8);
}

TEST(MatmulPrecision, MediumUsesBf16ProductsOnlyWithNativeBf16) {
  const std::vector<float> highest = probe().to_vector();
  MatmulPrecisionGuard medium(MatmulPrecision::medium);
  const std::vector<float> y = probe().to_vector();
  // The decision (isa_allowed: the reported class allows native bf16) asks oneDNN for bf16
  // products; whether it computes them in bf16 depends on the level that executes
  // (cpu_class_expect.h). Without native bf16 the decision is no: exactly the f32 answer.
  const bool asked = isa_allowed(Isa::avx512_bf16);
  const bool rounded = !y.empty() && y[0] != highest[0];
  if (asked && ctest::expected_onednn_native_bf16()) {
    // Native bf16 dot products: inputs are rounded to bf16 (1 + 2^-10 -> 1) inside the GEMM.
    for (float v : y) EXPECT_NEAR(v, 64.0f, 64.0f * traits(DType::bf16).epsilon);
  } else if (!asked) {
    // Emulated bf16 would be slower than f32, so medium falls back to true f32 here.
    EXPECT_EQ(y, highest);
  } else {
    // A profile that allows bf16 on hardware without it: oneDNN may round or not, but every
    // element must be one of the two answers.
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (rounded) {
        EXPECT_NEAR(y[i], 64.0f, 64.0f * traits(DType::bf16).epsilon);
      } else {
        EXPECT_EQ(y[i], highest[i]);
      }
    }
  }
}

}  // namespace
}  // namespace mixprec::runtime
