// The fused update kernels: AVX-512 against the scalar reference, fp32 masters keeping tiny
// updates that 16-bit parameters alone would lose, and stochastic rounding without masters.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/half.h"
#include "mixprec/core/tensor.h"
#include "mixprec/core/verbose.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::optim {
namespace {

/// Caps the ISA for a scope and restores the previous level.
class IsaCap {
 public:
  explicit IsaCap(Isa cap) { set_max_isa(cap); }
  ~IsaCap() { set_max_isa(saved_); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;

 private:
  Isa saved_ = max_isa();
};

std::vector<std::uint8_t> bits_of(const Tensor& t) {
  std::vector<std::uint8_t> out(t.nbytes());
  std::memcpy(out.data(), t.data_ptr(), t.nbytes());
  return out;
}

using Factory = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;

/// n values in [-2, 2) from a 64-bit LCG (cheap, so 100003-element tensors cost nothing), with a
/// few exact zeros and tiny magnitudes mixed in.
Tensor values(std::int64_t n, std::uint64_t seed, DType dtype) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i < v.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const float u = static_cast<float>(x >> 40) * 0x1p-24f * 4.0f - 2.0f;
    v[i] = i % 13 == 5 ? 0.0f : i % 7 == 2 ? u * 1e-6f : u;
  }
  return Tensor::from_vector(v, {n}, dtype);
}

/// Parameter bits and state bits after 3 steps (one parameter of n elements).
std::vector<std::vector<std::uint8_t>> run_steps(const Factory& make, std::int64_t n, DType param,
                                                 DType grad) {
  Tensor p = values(n, 11, param);
  p.set_requires_grad();
  std::unique_ptr<Optimizer> opt = make({p});
  for (int t = 1; t <= 3; ++t) {
    p.set_grad(values(n, 20 + t, grad));
    opt->step();
  }
  std::vector<std::vector<std::uint8_t>> out{bits_of(p)};
  for (const auto& entry : opt->state_tensors()) out.push_back(bits_of(entry.second));
  return out;
}

struct Config {
  DType param, grad;
  MasterWeights master;
};

// Bit-exact, not 1 ulp: both kernels run the same sequence of IEEE operations (fma, mul, div,
// sqrt), each correctly rounded, and the 16-bit writes use the same integer rounding; nothing
// is reassociated or approximated (no rcp14/rsqrt14), so any difference is a bug.
TEST(OptimKernels, Avx512MatchesReferenceBitForBit) {
  if (max_isa() < Isa::avx512) GTEST_SKIP() << "CPU (or MIXPREC_ISA) does not allow AVX-512";
  const Config configs[] = {
      {DType::f32, DType::f32, MasterWeights::keep_fp32},
      {DType::f32, DType::bf16, MasterWeights::keep_fp32},
      {DType::bf16, DType::bf16, MasterWeights::keep_fp32},
      {DType::bf16, DType::f32, MasterWeights::keep_fp32},
      {DType::f16, DType::f16, MasterWeights::keep_fp32},
      {DType::bf16, DType::f32, MasterWeights::none_stochastic_rounding},
  };
  const std::vector<std::pair<std::string, std::function<Factory(OptimizerOptions)>>> optimizers{
      {"SGD", [](OptimizerOptions c) -> Factory {
         return [c](std::vector<Tensor> ps) { return std::make_unique<SGD>(ps, SgdOptions{.lr = 0.1f}, c); };
       }},
      {"SGD-nesterov", [](OptimizerOptions c) -> Factory {
         return [c](std::vector<Tensor> ps) {
           return std::make_unique<SGD>(ps, SgdOptions{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .nesterov = true}, c);
         };
       }},
      {"SGD-dampening", [](OptimizerOptions c) -> Factory {
         return [c](std::vector<Tensor> ps) {
           return std::make_unique<SGD>(ps, SgdOptions{.lr = 0.1f, .momentum = 0.5f, .dampening = 0.25f}, c);
         };
       }},
      {"Adam", [](OptimizerOptions c) -> Factory {
         return [c](std::vector<Tensor> ps) { return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.01f, .weight_decay = 0.1f}, c); };
       }},
      {"AdamW", [](OptimizerOptions c) -> Factory {
         return [c](std::vector<Tensor> ps) { return std::make_unique<AdamW>(ps, AdamWOptions{.lr = 0.01f}, c); };
       }},
  };
  for (const std::int64_t n : {1, 17, 100003}) {
    for (const Config& c : configs) {
      for (const auto& [label, factory] : optimizers) {
        SCOPED_TRACE(label + " n=" + std::to_string(n) + " param " + name(c.param) + " grad " +
                     name(c.grad) + (c.master == MasterWeights::keep_fp32 ? " master" : " stochastic"));
        const Factory make = factory({.master_weights = c.master, .seed = 5});
        const auto vector = run_steps(make, n, c.param, c.grad);
        std::vector<std::vector<std::uint8_t>> scalar;
        {
          IsaCap cap(Isa::scalar);
          scalar = run_steps(make, n, c.param, c.grad);
        }
        ASSERT_EQ(vector.size(), scalar.size());
        for (std::size_t k = 0; k < vector.size(); ++k) EXPECT_TRUE(vector[k] == scalar[k]) << "tensor " << k;
      }
    }
  }
}

TEST(OptimKernels, VerboseNamesTheKernelThatRan) {
  if (max_isa() < Isa::avx512) GTEST_SKIP() << "CPU (or MIXPREC_ISA) does not allow AVX-512";
  Tensor p = values(8, 1, DType::bf16);
  p.set_requires_grad();
  Adam opt({p});
  p.set_grad(values(8, 2, DType::f16));
  const bool was = verbose_enabled();
  set_verbose(true);
  testing::internal::CaptureStderr();
  opt.step();
  {
    IsaCap cap(Isa::scalar);
    opt.step();
  }
  const std::string log = testing::internal::GetCapturedStderr();
  set_verbose(was);
  EXPECT_NE(log.find("adam_update bf16 (grad f16, fp32 master): ran avx512"), std::string::npos) << log;
  EXPECT_NE(log.find("ran ref; skipped: avx512: capped at scalar"), std::string::npos) << log;
}

/// n elements of a 16-bit parameter at 1.0 after `steps` SGD updates of exactly lr (grad 1).
Tensor tiny_updates(DType dtype, MasterWeights master, int steps, std::int64_t n, std::uint64_t seed,
                    std::unique_ptr<SGD>* keep = nullptr) {
  const std::vector<float> ones(static_cast<std::size_t>(n), 1.0f);
  Tensor p = Tensor::from_vector(ones, {n}, dtype);
  p.set_requires_grad();
  auto opt = std::make_unique<SGD>(std::vector<Tensor>{p}, SgdOptions{.lr = 1e-4f},
                                   OptimizerOptions{.master_weights = master, .seed = seed});
  const Tensor g = Tensor::from_vector(ones, {n}, DType::f32);
  for (int t = 0; t < steps; ++t) {
    p.set_grad(g);
    opt->step();
  }
  if (keep != nullptr) *keep = std::move(opt);
  return p;
}

TEST(OptimMaster, Fp32MasterKeepsUpdatesA16BitParameterWouldLose) {
  // Updating bf16 (or f16) directly with round-to-nearest loses every 1e-4 step below 1.0,
  // where the spacing is 2^-8 (2^-11): the parameter never moves.
  bfloat16 b(1.0f);
  float16 h(1.0f);
  for (int t = 0; t < 1000; ++t) b = bfloat16(static_cast<float>(b) - 1e-4f), h = float16(static_cast<float>(h) - 1e-4f);
  EXPECT_EQ(static_cast<float>(b), 1.0f);
  EXPECT_EQ(static_cast<float>(h), 1.0f);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    std::unique_ptr<SGD> opt;
    const Tensor p = tiny_updates(dtype, MasterWeights::keep_fp32, 1000, 16, 0, &opt);
    // 1000 f32 subtractions near 0.9 round by at most 2^-25 each: 3e-5 in all.
    for (const float m : opt->master(0).to_vector()) EXPECT_NEAR(m, 0.9f, 5e-5f) << name(dtype);
    const std::vector<float> values = p.to_vector();
    const float master0 = opt->master(0).to_vector()[0];
    for (const float v : values) {
      EXPECT_EQ(v, Tensor::from_vector({master0}, {1}, dtype).item());  // RNE copy of the master
      EXPECT_NEAR(v, 0.9f, traits(dtype).epsilon / 4);  // half the spacing (epsilon/2) in [0.5, 1)
    }
  }
}

TEST(OptimStochastic, MeanFollowsTheExactTrajectory) {
  // Each step rounds 1e-4 down with probability 1e-4 / spacing; the per-element noise after 1000
  // steps has a std of about 0.02 (bf16) or 0.006 (f16), so the mean of 4096 elements is within
  // 5 sigma = 0.0016 of 0.9 (seeded: the check is deterministic).
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const std::vector<float> v = tiny_updates(dtype, MasterWeights::none_stochastic_rounding, 1000, 4096, 42).to_vector();
    double mean = 0;
    for (const float x : v) mean += x;
    mean /= static_cast<double>(v.size());
    EXPECT_NEAR(mean, 0.9, 0.002) << name(dtype);
    EXPECT_NE(*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  }
}

TEST(OptimStochastic, ReproducibleAndIndependentOfThreads) {
  constexpr std::int64_t n = 100003;  // several OpenMP chunks
  const auto a = bits_of(tiny_updates(DType::bf16, MasterWeights::none_stochastic_rounding, 3, n, 9));
  const auto b = bits_of(tiny_updates(DType::bf16, MasterWeights::none_stochastic_rounding, 3, n, 9));
  const auto c = bits_of(tiny_updates(DType::bf16, MasterWeights::none_stochastic_rounding, 3, n, 10));
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = bits_of(tiny_updates(DType::bf16, MasterWeights::none_stochastic_rounding, 3, n, 9));
  omp_set_num_threads(threads);
  EXPECT_TRUE(a == one);
}

}  // namespace
}  // namespace mixprec::optim
