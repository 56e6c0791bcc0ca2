// EMA of weights against a double re-computation, f32 precision for bf16 parameters, the Swap
// guard (including exception safety), copy_to, memory category, state save/load, bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/memory.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/ema.h"

namespace mixprec::optim {
namespace {

constexpr double kF32Eps = traits(DType::f32).epsilon;

Tensor leaf(const Shape& shape, DType dtype, std::uint64_t seed) {
  Tensor t = Tensor::randn(shape, seed, dtype);
  t.set_requires_grad();
  return t;
}

/// Overwrites t's values (as an optimizer step would, in place).
void assign(const Tensor& t, const std::vector<float>& values) {
  const Tensor src = Tensor::from_vector(values, t.shape(), t.dtype());
  std::copy_n(static_cast<const char*>(src.data_ptr()), t.nbytes(), static_cast<char*>(t.data_ptr()));
}

/// Each update rounds twice in f32 (product and sum), each at most eps/2 relative; the error is
/// damped by decay at every later update, so it stays below eps * max|x| / (1 - decay).
double ema_tolerance(double decay, double magnitude) { return kF32Eps * magnitude / (1.0 - decay); }

TEST(EMA, MatchesDoubleRecomputationWithAndWithoutWarmup) {
  for (bool warmup : {false, true}) {
    // 40000 elements (above the 32K threshold): the update runs on several threads.
    NamedParams params{{"a", leaf({40000}, DType::f32, 1)}, {"b", leaf({3, 5}, DType::f16, 2)}};
    constexpr float kDecay = 0.9f;
    EMA ema(params, kDecay, warmup);
    std::vector<std::vector<double>> ref;
    for (const auto& [n, p] : params) {
      const std::vector<float> v = p.to_vector();
      ref.emplace_back(v.begin(), v.end());
    }
    for (int t = 0; t < 20; ++t) {
      const double d = warmup ? std::min(double{kDecay}, (1.0 + t) / (10.0 + t)) : double{kDecay};
      EXPECT_FLOAT_EQ(ema.current_decay(), static_cast<float>(d));
      for (std::size_t i = 0; i < params.size(); ++i) {  // the "optimizer" moves the weights
        const Tensor& p = params[i].second;
        std::vector<float> next(static_cast<std::size_t>(p.numel()));
        for (std::size_t j = 0; j < next.size(); ++j) next[j] = 1.0f + 2.0f * std::sin(0.37f * j + t);
        assign(p, next);
        const std::vector<float> v = p.to_vector();
        for (std::size_t j = 0; j < v.size(); ++j) ref[i][j] = d * ref[i][j] + (1 - d) * v[j];
      }
      ema.update();
    }
    EXPECT_EQ(ema.num_updates(), 20);
    const auto shadows = ema.shadow();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> got = shadows.at(params[i].first).to_vector();
      for (std::size_t j = 0; j < got.size(); ++j) {
        // All |x| < 8 in these samples.
        ASSERT_NEAR(got[j], ref[i][j], ema_tolerance(kDecay, 8.0)) << params[i].first << j;
      }
    }
  }
}

TEST(EMA, Bf16ParameterIsAveragedInF32) {
  Tensor w = Tensor::zeros({8}, DType::bf16);
  w.set_requires_grad();
  constexpr float kDecay = 0.999f;
  EMA ema({{"w", w}}, kDecay);
  assign(w, std::vector<float>(8, 1.0f));  // the model jumps to a constant
  for (int t = 0; t < 1000; ++t) ema.update();
  const double want = 1.0 - std::pow(double{kDecay}, 1000);  // 0.6323...
  const Tensor s = ema.shadow().at("w");
  EXPECT_EQ(s.dtype(), DType::f32);
  // A bf16 average rounds each update: 0.1% of the gap is below half a bf16 ulp long before
  // 0.63, so it stalls. Show that, so the test can tell the two apart.
  float bf16_avg = 0.0f;
  for (int t = 0; t < 1000; ++t) {
    bf16_avg = static_cast<float>(bfloat16(bf16_avg + (1.0f - kDecay) * (1.0f - bf16_avg)));
  }
  ASSERT_GT(std::fabs(bf16_avg - want), 0.01);
  for (float v : s.to_vector()) {
    EXPECT_NEAR(v, want, ema_tolerance(kDecay, 1.0));
    EXPECT_NE(v, static_cast<float>(bfloat16(v)));  // carries more than bf16's 8 bits
  }
}

TEST(EMA, ShadowsAreF32OptimizerState) {
  const MemoryStats before = memory_stats();
  NamedParams params{{"w", leaf({10, 10}, DType::bf16, 3)}, {"b", leaf({10}, DType::f16, 4)}};
  EMA ema(params, 0.99f);
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.current_of(MemoryCategory::optimizer_state) -
                before.current_of(MemoryCategory::optimizer_state),
            110u * 4u);
  for (const auto& [n, s] : ema.shadow()) {
    EXPECT_EQ(s.dtype(), DType::f32) << n;
    EXPECT_EQ(s.category(), MemoryCategory::optimizer_state) << n;
  }
  // Initialised to the parameters' values (exact widening).
  EXPECT_EQ(ema.shadow().at("w").to_vector(), params[0].second.to_vector());
}

NamedParams trained_model(EMA*& out_ema, std::vector<std::unique_ptr<EMA>>& keep) {
  NamedParams params{{"w", leaf({6, 7}, DType::bf16, 5)}, {"b", leaf({7}, DType::f32, 6)}};
  keep.push_back(std::make_unique<EMA>(params, 0.5f));
  out_ema = keep.back().get();
  for (int t = 0; t < 3; ++t) {
    for (const auto& [n, p] : params) {
      assign(p, Tensor::randn(p.shape(), 40 + t, DType::f32).to_vector());
    }
    out_ema->update();
  }
  return params;
}

TEST(EMA, SwapInstallsAveragesAndRestoresTrainingWeightsBitForBit) {
  EMA* ema = nullptr;
  std::vector<std::unique_ptr<EMA>> keep;
  const NamedParams params = trained_model(ema, keep);
  std::vector<std::vector<float>> training;
  for (const auto& [n, p] : params) training.push_back(p.to_vector());
  {
    EMA::Swap swap(*ema);
    for (const auto& [n, p] : params) {
      // The average rounded once to the parameter's dtype.
      const Tensor expect = ema->shadow().at(n).to(p.dtype());
      EXPECT_EQ(p.to_vector(), expect.to_vector()) << n;
      EXPECT_NE(p.to_vector(), training[n == "w" ? 0 : 1]) << n;
    }
  }
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].second.to_vector(), training[i]);
}

TEST(EMA, SwapRestoresWeightsWhenAnExceptionLeavesTheScope) {
  EMA* ema = nullptr;
  std::vector<std::unique_ptr<EMA>> keep;
  const NamedParams params = trained_model(ema, keep);
  std::vector<std::vector<float>> training;
  for (const auto& [n, p] : params) training.push_back(p.to_vector());
  const auto version = params[0].second.version();
  EXPECT_THROW(
      {
        EMA::Swap swap(*ema);
        EXPECT_NE(params[0].second.to_vector(), training[0]);
        throw std::runtime_error("evaluation failed");
      },
      std::runtime_error);
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].second.to_vector(), training[i]);
  EXPECT_GT(params[0].second.version(), version);  // in-place writes are visible to autograd
}

TEST(EMA, CopyToAnotherModelByNameValidatesFirst) {
  EMA* ema = nullptr;
  std::vector<std::unique_ptr<EMA>> keep;
  trained_model(ema, keep);
  // An f32 evaluation copy of the model receives the averages exactly.
  NamedParams eval{{"b", Tensor::zeros({7})}, {"w", Tensor::zeros({6, 7})}};
  ema->copy_to(eval);
  EXPECT_EQ(eval[0].second.to_vector(), ema->shadow().at("b").to_vector());
  EXPECT_EQ(eval[1].second.to_vector(), ema->shadow().at("w").to_vector());

  NamedParams unknown{{"b", Tensor::zeros({7})}, {"nope", Tensor::zeros({7})}};
  EXPECT_THROW(ema->copy_to(unknown), ValueError);
  EXPECT_EQ(unknown[0].second.to_vector(), std::vector<float>(7, 0.0f));  // nothing written
  NamedParams shape{{"b", Tensor::zeros({7})}, {"w", Tensor::zeros({7, 6})}};
  EXPECT_THROW(ema->copy_to(shape), ShapeError);
  EXPECT_EQ(shape[0].second.to_vector(), std::vector<float>(7, 0.0f));
}

TEST(EMA, StateSaveAndLoadResumesIdentically) {
  NamedParams params{{"w", leaf({5, 3}, DType::bf16, 7)}};
  EMA a(params, 0.8f, /*warmup=*/true);
  for (int t = 0; t < 4; ++t) a.update();
  EmaState saved = a.state();
  EXPECT_EQ(saved.num_updates, 4);
  for (auto& [n, t] : saved.shadows) t = t.clone();  // a snapshot, not live handles

  EMA b(params, 0.8f, true);
  b.load_state(saved);
  EXPECT_EQ(b.num_updates(), 4);
  EXPECT_EQ(b.current_decay(), a.current_decay());
  a.update();
  b.update();
  EXPECT_EQ(a.shadow().at("w").to_vector(), b.shadow().at("w").to_vector());

  const std::vector<float> kept = b.shadow().at("w").to_vector();
  EmaState bad = saved;
  bad.shadows[0].first = "other";
  EXPECT_THROW(b.load_state(bad), StateError);
  bad = saved;
  bad.shadows[0].second = Tensor::zeros({3, 5});
  EXPECT_THROW(b.load_state(bad), StateError);
  bad = saved;
  bad.shadows.push_back(saved.shadows[0]);
  EXPECT_THROW(b.load_state(bad), StateError);
  bad = saved;
  bad.num_updates = -1;
  EXPECT_THROW(b.load_state(bad), StateError);
  EXPECT_EQ(b.shadow().at("w").to_vector(), kept);
  EXPECT_EQ(b.num_updates(), 5);
}

TEST(EMA, BadArgumentsThrowValueError) {
  const Tensor w = leaf({4}, DType::f32, 8);
  for (float d : {0.0f, 1.0f, -0.5f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_THROW(EMA({{"w", w}}, d), ValueError) << d;
  }
  EXPECT_THROW(EMA({}, 0.9f), ValueError);
  EXPECT_THROW(EMA({{"w", w}, {"w", w}}, 0.9f), ValueError);
  EXPECT_THROW(EMA({{"w", Tensor()}}, 0.9f), ValueError);
  const Tensor m = Tensor::zeros({3, 4}).transpose(0, 1);
  EXPECT_THROW(EMA({{"m", m}}, 0.9f), ValueError);
  try {
    EMA({{"w", w}}, 2.0f);
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("EMA:", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace mixprec::optim
