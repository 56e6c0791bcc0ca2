// GradScaler: the per-optimizer state machine and its misuse errors, the scale trajectory against
// a re-statement of PyTorch's update rule (plus hysteresis and clamps), skipped steps, several
// optimizers sharing one scale, fp16 gradient underflow rescued by scaling, 16-bit gradients,
// the disabled pass-through, and grad_scale bookkeeping.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::amp {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::int64_t kN = 5;

Tensor leaf(float value, DType dtype = DType::f32) {
  Tensor t = Tensor::full({kN}, value, dtype);
  t.set_requires_grad();
  return t;
}

/// Gives p a gradient as a scaled backward would: 0.25, 0.5, ..., 1.25 times `scale` (finite
/// even for a scale of 2^127), with `bad`
/// (Inf/NaN; 0 for none) at element 2.
void set_scaled_grad(const Tensor& p, double scale, float bad = 0.0f) {
  std::vector<float> g(kN);
  for (std::int64_t i = 0; i < kN; ++i)
    g[i] = static_cast<float>(0.25 * static_cast<double>(i + 1) * scale);
  if (bad != 0.0f) g[2] = bad;  // NaN != 0 holds too
  p.set_grad(Tensor::from_vector(g, {kN}, p.dtype()));
  p.set_grad_scale(scale);
}

/// Runs fn and expects an exception of type E whose message starts with "GradScaler: " and
/// contains `text`.
template <class E>
void expect_error(const std::function<void()>& fn, const std::string& text) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception containing: " << text;
  } catch (const E& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("GradScaler: ", 0), 0u) << what;
    EXPECT_NE(what.find(text), std::string::npos) << what;
  }
}

TEST(GradScalerStateMachine, TransitionsAndMisuse) {
  Tensor p = leaf(1.0f);
  optim::SGD opt({p}, {.lr = 0.1f});
  GradScaler scaler;
  const double s = scaler.get_scale();
  EXPECT_EQ(s, 65536.0);
  expect_error<StateError>([&] { scaler.update(); }, "no inf checks were recorded prior to update");

  set_scaled_grad(p, s);
  EXPECT_FALSE(scaler.found_inf(opt).has_value());
  scaler.unscale(opt);  // READY -> UNSCALED
  EXPECT_EQ(scaler.found_inf(opt), std::optional<bool>(false));
  expect_error<StateError>(
      [&] { scaler.unscale(opt); },
      "unscale() has already been called on this optimizer since the last update()");
  EXPECT_TRUE(scaler.step(opt));  // UNSCALED -> STEPPED, without unscaling twice
  EXPECT_EQ(p.grad().to_vector()[0], 0.25f);
  expect_error<StateError>([&] { scaler.unscale(opt); }, "unscale() is being called after step()");
  expect_error<StateError>([&] { scaler.step(opt); }, "step() has already been called");
  scaler.update();  // back to READY
  EXPECT_FALSE(scaler.found_inf(opt).has_value());

  set_scaled_grad(p, scaler.get_scale());
  EXPECT_TRUE(scaler.step(opt));  // READY -> STEPPED unscales first
  EXPECT_EQ(p.grad().to_vector()[4], 1.25f);
  scaler.update();
  EXPECT_EQ(opt.steps(), 2);
}

TEST(GradScalerStateMachine, InvalidOptionsAndScales) {
  const auto bad = [](GradScalerOptions o, const std::string& text) {
    expect_error<ValueError>([&] { GradScaler s(o); }, text);
  };
  bad({.growth_factor = 1.0}, "growth_factor");
  bad({.backoff_factor = 1.0}, "backoff_factor");
  bad({.backoff_factor = 0.0}, "backoff_factor");
  bad({.growth_interval = 0}, "growth_interval");
  bad({.hysteresis = 0}, "hysteresis");
  bad({.init_scale = -1.0}, "init_scale");
  bad({.init_scale = std::nan("")}, "init_scale");
  bad({.init_scale = 8.0, .min_scale = 16.0}, "min_scale <= init_scale <= max_scale");
  bad({.init_scale = 8.0, .max_scale = 4.0}, "min_scale <= init_scale <= max_scale");
  bad({.init_scale = 1e300, .max_scale = 1e301}, "normal f32 range");
  GradScaler scaler;
  expect_error<ValueError>([&] { scaler.update(0.0); }, "new_scale");
  expect_error<ValueError>([&] { scaler.update(std::numeric_limits<double>::infinity()); },
                           "new_scale");
  expect_error<ValueError>([&] { scaler.update(1e-60); }, "normal f32 range");
  expect_error<ValueError>([&] { (void)scaler.scale(Tensor()); }, "undefined");
}

/// PyTorch's _amp_update_scale_ restated (scale held in f32), with the hysteresis counter and
/// clamps of GradScalerOptions.
struct ReferenceRule {
  GradScalerOptions o;
  double scale = static_cast<float>(o.init_scale);
  std::int64_t tracker = 0;
  int left = o.hysteresis;
  void update(bool overflow) {
    const double hi = std::min(o.max_scale, static_cast<double>(std::numeric_limits<float>::max()));
    if (overflow) {
      tracker = 0;
      if (--left == 0) {
        scale = std::max(static_cast<double>(static_cast<float>(scale * o.backoff_factor)),
                         o.min_scale);
        left = o.hysteresis;
      }
      return;
    }
    if (o.consecutive_hysteresis) left = o.hysteresis;
    if (++tracker == o.growth_interval) {
      const float grown = static_cast<float>(scale * o.growth_factor);
      if (std::isfinite(grown)) scale = std::min(static_cast<double>(grown), hi);
      tracker = 0;
      left = o.hysteresis;
    }
  }
};

/// Drives a real scaler and SGD through `script` ('O' overflow, 'C' clean) and returns the
/// scales after each update(), checking them and the growth tracker against ReferenceRule.
std::vector<double> run_script(const GradScalerOptions& o, const std::string& script) {
  Tensor p = leaf(1.0f);
  optim::SGD opt({p}, {.lr = 0.1f});
  GradScaler scaler(o);
  ReferenceRule ref{o};
  std::vector<double> scales;
  for (char c : script) {
    set_scaled_grad(p, scaler.get_scale(), c == 'O' ? kInf : 0.0f);
    EXPECT_EQ(scaler.step(opt), c == 'C');
    scaler.update();
    ref.update(c == 'O');
    EXPECT_EQ(scaler.get_scale(), ref.scale) << script;
    EXPECT_EQ(scaler.growth_tracker(), ref.tracker) << script;
    EXPECT_EQ(scaler.hysteresis_left(), ref.left) << script;
    scales.push_back(scaler.get_scale());
  }
  return scales;
}

TEST(GradScalerTrajectory, GrowthAtIntervalAndBackoffResetTracker) {
  // Growth exactly at the 3rd clean step; an overflow halves and restarts the count.
  const std::vector<double> got =
      run_script({.init_scale = 8.0, .growth_interval = 3}, "CCCOCCCCOOC");
  const std::vector<double> want = {8, 8, 16, 8, 8, 8, 16, 16, 8, 4, 4};
  EXPECT_EQ(got, want);
  // Factors that are not powers of two: every scale is the f32 rounding of the product.
  run_script(
      {.init_scale = 1000.0, .growth_factor = 3.0, .backoff_factor = 0.3, .growth_interval = 2},
      "CCOCCCOOCCCCO");
}

TEST(GradScalerTrajectory, Hysteresis) {
  // hysteresis 2, DeepSpeed's default: a clean step in between does not restore the counter.
  EXPECT_EQ(run_script({.init_scale = 1024.0, .growth_interval = 3, .hysteresis = 2}, "OCOO"),
            (std::vector<double>{1024, 1024, 512, 512}));
  // consecutive_hysteresis: only consecutive overflows count.
  EXPECT_EQ(run_script({.init_scale = 1024.0,
                        .growth_interval = 3,
                        .hysteresis = 2,
                        .consecutive_hysteresis = true},
                       "OCOCOO"),
            (std::vector<double>{1024, 1024, 1024, 1024, 1024, 512}));
  // hysteresis 3: every third overflow backs off; a growth restores the counter.
  EXPECT_EQ(run_script({.init_scale = 1024.0, .growth_interval = 2, .hysteresis = 3}, "OOOOOCCOOO"),
            (std::vector<double>{1024, 1024, 512, 512, 512, 512, 1024, 1024, 1024, 512}));
}

TEST(GradScalerTrajectory, ClampsAndF32Overflow) {
  EXPECT_EQ(run_script({.init_scale = 512.0, .min_scale = 256.0}, "OOO"),
            (std::vector<double>{256, 256, 256}));
  EXPECT_EQ(run_script({.init_scale = 1024.0, .growth_interval = 1, .max_scale = 3000.0}, "CCC"),
            (std::vector<double>{2048, 3000, 3000}));
  // 2^127 * 2 overflows f32: PyTorch keeps the scale.
  const double big = std::ldexp(1.0, 127);
  EXPECT_EQ(run_script({.init_scale = big, .growth_interval = 1}, "CC"),
            (std::vector<double>{big, big}));
}

TEST(GradScalerTrajectory, ExplicitNewScale) {
  Tensor p = leaf(1.0f);
  optim::SGD opt({p}, {.lr = 0.1f});
  GradScaler scaler({.init_scale = 64.0, .growth_interval = 3});
  set_scaled_grad(p, 64.0);
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(scaler.growth_tracker(), 1);
  scaler.update(300.0);  // allowed without inf checks; counters untouched
  EXPECT_EQ(scaler.get_scale(), 300.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  scaler.update(0.1);  // rounded to f32 like PyTorch's f32 scale tensor
  EXPECT_EQ(scaler.get_scale(), static_cast<double>(0.1f));
}

TEST(GradScalerSteps, SkippedStepLeavesParametersAndStepCount) {
  for (float bad : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()}) {
    Tensor p = leaf(1.0f);
    optim::SGD opt({p}, {.lr = 0.5f});
    GradScaler scaler;
    set_scaled_grad(p, scaler.get_scale(), bad);
    EXPECT_FALSE(scaler.step(opt));
    EXPECT_EQ(p.to_vector(), std::vector<float>(kN, 1.0f));
    EXPECT_EQ(opt.steps(), 0);
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), 32768.0);
    set_scaled_grad(p, scaler.get_scale());
    EXPECT_TRUE(scaler.step(opt));
    EXPECT_EQ(opt.steps(), 1);
    EXPECT_EQ(p.to_vector()[1], 1.0f - 0.5f * 0.5f);  // unscaled gradient 0.5
  }
}

TEST(GradScalerSteps, SeveralOptimizersShareTheScale) {
  Tensor a = leaf(1.0f);
  Tensor b = leaf(1.0f);
  optim::SGD opt_a({a}, {.lr = 0.5f});
  optim::SGD opt_b({b}, {.lr = 0.5f});
  GradScaler scaler({.init_scale = 1024.0});
  set_scaled_grad(a, 1024.0);
  set_scaled_grad(b, 1024.0, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(scaler.step(opt_a));   // a's gradients are finite: it steps
  EXPECT_FALSE(scaler.step(opt_b));  // b's are not: only its step is skipped
  EXPECT_EQ(opt_a.steps(), 1);
  EXPECT_EQ(opt_b.steps(), 0);
  EXPECT_EQ(b.to_vector(), std::vector<float>(kN, 1.0f));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 512.0);  // any overflow backs off the shared scale

  // An inf found by unscale() alone (no step) counts too, as in PyTorch.
  set_scaled_grad(a, 512.0, kInf);
  set_scaled_grad(b, 512.0);
  scaler.unscale(opt_a);
  EXPECT_TRUE(scaler.step(opt_b));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 256.0);
  // Both clean: growth tracker advances once per update, not per optimizer.
  set_scaled_grad(a, 256.0);
  set_scaled_grad(b, 256.0);
  scaler.step(opt_a);
  scaler.step(opt_b);
  scaler.update();
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScalerUnderflow, Fp16GradientsVanishWithoutScalingAndSurviveWithIt) {
  // w (f32 master, 1e-4) is cast to f16 and multiplied by an f16 input of 1e-4; the f32 loss
  // weighs the product by y = 1e-4. dL/dw = y * x ~ 1e-8: the f16 backward of the product
  // computes dL/dp (1e-4, a normal f16) times x and rounds 1e-8 to f16, whose smallest
  // subnormal is 6e-8, so it becomes 0. Scaled by 65536 it is 6.6e-4, a normal f16.
  ASSERT_EQ(static_cast<float>(float16(1e-8f)), 0.0f);
  const Tensor x16 = Tensor::full({kN}, 1e-4f, DType::f16);
  const Tensor y = Tensor::full({kN}, 1e-4f);
  Tensor w = leaf(1e-4f);
  const auto loss_fn = [&] { return sum(mul(cast(mul(cast(w, DType::f16), x16), DType::f32), y)); };
  const double truth = static_cast<double>(1e-4f) * static_cast<double>(x16.to_vector()[0]);

  loss_fn().backward();
  EXPECT_EQ(w.grad().to_vector(), std::vector<float>(kN, 0.0f));  // underflowed in f16
  EXPECT_EQ(w.grad_scale(), 1.0);

  optim::SGD opt({w}, {.lr = 1.0f});
  opt.zero_grad();
  GradScaler scaler;
  scaler.scale(loss_fn()).backward();
  EXPECT_EQ(w.grad_scale(), 65536.0);  // recorded by the scaled backward
  scaler.unscale(opt);
  EXPECT_EQ(w.grad_scale(), 1.0);
  EXPECT_EQ(scaler.found_inf(opt), std::optional<bool>(false));
  // Two f16 roundings (dL/dp and the product), each within eps/2 relative; the power-of-two
  // unscale is exact. 1.01 covers the second-order term.
  for (float g : w.grad().to_vector()) {
    EXPECT_NEAR(g, truth, 1.01 * traits(DType::f16).epsilon * truth);
  }
}

TEST(GradScalerDtypes, SixteenBitGradients) {
  Tensor p32 = leaf(1.0f);
  Tensor p16 = leaf(1.0f, DType::bf16);
  optim::SGD opt({p32, p16}, {.lr = 0.5f});
  set_scaled_grad(p32, 4.0);
  set_scaled_grad(p16, 4.0);
  GradScaler scaler({.init_scale = 4.0});
  expect_error<DTypeError>(
      [&] { scaler.unscale(opt); },
      "unscale: gradient of parameter 1 is bf16; master gradients must be fp32 "
      "(keep parameters fp32 and compute in bf16 via autocast), or set "
      "allow_16bit_grads");
  EXPECT_EQ(p32.grad().to_vector()[0], 1.0f);  // checked before anything changed
  EXPECT_EQ(p32.grad_scale(), 4.0);

  GradScaler allowed({.init_scale = 4.0, .allow_16bit_grads = true});
  EXPECT_TRUE(allowed.step(opt));
  EXPECT_EQ(p16.grad().dtype(), DType::bf16);
  EXPECT_EQ(p16.grad().to_vector(), (std::vector<float>{0.25f, 0.5f, 0.75f, 1.0f, 1.25f}));
  allowed.update();

  // f16: unscaling by 1/0.5 pushes 40000 past the f16 max: an overflow of the output.
  Tensor h = leaf(1.0f, DType::f16);
  optim::SGD opt_h({h}, {.lr = 0.5f});
  GradScaler small({.init_scale = 0.5, .allow_16bit_grads = true});
  h.set_grad(Tensor::full({kN}, 40000.0f, DType::f16));
  h.set_grad_scale(0.5);
  EXPECT_FALSE(small.step(opt_h));
}

TEST(GradScalerDisabled, PassThrough) {
  Tensor p = leaf(1.0f);
  optim::SGD opt({p}, {.lr = 0.5f});
  GradScaler scaler({.enabled = false});
  EXPECT_FALSE(scaler.is_enabled());
  EXPECT_EQ(scaler.get_scale(), 1.0);
  const Tensor loss = sum(p);
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  set_scaled_grad(p, 1.0, kInf);
  scaler.unscale(opt);
  scaler.unscale(opt);  // no state machine when disabled
  EXPECT_EQ(p.grad().to_vector()[2], kInf);
  EXPECT_TRUE(scaler.step(opt));  // steps even with Inf: no checks when disabled
  EXPECT_EQ(opt.steps(), 1);
  scaler.update();  // no "no inf checks" error
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.stats().scale_history.empty());
}

TEST(GradScalerBookkeeping, GradScaleFollowsScaleAndUnscale) {
  Tensor w = leaf(2.0f);
  optim::SGD opt({w}, {.lr = 0.5f});
  GradScaler scaler({.init_scale = 1024.0});
  const Tensor scaled = scaler.scale(mul(w, w));  // not a 0-d loss: any shape is accepted
  EXPECT_EQ(scaled.impl().loss_scale, 1024.0);
  EXPECT_EQ(scaled.dtype(), DType::f32);
  scaled.backward(Tensor::ones({kN}));
  EXPECT_EQ(w.grad_scale(), 1024.0);
  EXPECT_EQ(w.grad().to_vector()[0], 4.0f * 1024.0f);
  scaler.step(opt);
  EXPECT_EQ(w.grad_scale(), 1.0);
  EXPECT_EQ(w.grad().to_vector()[0], 4.0f);
  scaler.update();
  // A 16-bit loss is cast to f32 before scaling, so 65536 * loss cannot overflow f16.
  GradScaler big;
  const Tensor s16 = big.scale(Tensor::scalar(2.0f, DType::f16));
  EXPECT_EQ(s16.dtype(), DType::f32);
  EXPECT_EQ(s16.item(), 131072.0f);
  // Gradients scaled by another scale (update() between backward and unscale) are refused.
  set_scaled_grad(w, 999.0);
  expect_error<StateError>([&] { scaler.unscale(opt); }, "was scaled by 999");
}

}  // namespace
}  // namespace mixprec::amp
