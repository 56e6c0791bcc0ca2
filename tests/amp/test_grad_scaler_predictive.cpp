// Predictive loss scaling (GradScalerOptions::mode = predictive): the scale is the largest power
// of two that keeps the recent gradient amax a margin below the f16 maximum, on a scripted amax
// sequence with known answers; overflows still skip and back off; an overflow the history did not
// predict widens the margin until growth_interval clean steps pass; clamps, hysteresis, zero
// gradients, several optimizers, bad options; state save/load and JSON (including version-1 text
// from before predictive scaling).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/error.h"
#include "mixprec/core/half.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::amp {
namespace {

constexpr double kF16Max = 65504.0;
constexpr float kInf = std::numeric_limits<float>::infinity();

double pow2(int k) { return std::ldexp(1.0, k); }

/// The answer by search: the largest 2^k (k in [-126, 127]) with 2^k * amax * margin <= 65504.
double largest_safe_scale(double amax, double margin) {
  for (int k = 127; k >= -126; --k) {
    if (pow2(k) * amax * margin <= kF16Max) return pow2(k);
  }
  return pow2(-126);
}

/// f16(x) widened back to f32: Inf past the f16 range, as an f16 backward pass would produce.
float through_f16(double x) { return f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(x))); }

/// One parameter whose scaled gradient is made the way an f16 backward pass makes it: the true
/// gradient (largest magnitude `amax`) times the scale, rounded to f16. `hidden` models a tensor
/// the unscale never sees (activation gradients): hidden * amax * scale must fit f16 too, else the
/// gradient gets an Inf, as the real one would through the chain rule.
struct F16Rig {
  Tensor p = [] {
    Tensor t = Tensor::zeros({3});
    t.set_requires_grad();
    return t;
  }();
  optim::SGD opt{{p}, {.lr = 0.01f}};
  /// The amax the scaler should measure in the last iteration (the f16-rounded value, unscaled).
  double measured = 0.0;

  void produce(const GradScaler& scaler, double amax, double hidden) {
    const double s = scaler.get_scale();
    std::vector<float> g = {through_f16(amax * s), through_f16(-0.5 * amax * s),
                            through_f16(0.25 * amax * s)};
    if (!std::isfinite(through_f16(hidden * amax * s))) g[1] = kInf;
    // The kernel multiplies by the f32 inverse; s is a power of two here, so that is exact.
    measured = static_cast<double>(g[0] * static_cast<float>(1.0 / s));
    p.set_grad(Tensor::from_vector(g, {3}));
    p.set_grad_scale(s);
  }
  /// One iteration; returns whether the optimizer stepped.
  bool iterate(GradScaler& scaler, double amax, double hidden = 1.0) {
    produce(scaler, amax, hidden);
    const bool ran = scaler.step(opt);
    scaler.update();
    return ran;
  }
};

GradScalerOptions predictive(std::size_t history = 4, std::int64_t growth_interval = 2000) {
  GradScalerOptions o;
  o.mode = ScalingMode::predictive;
  o.predictive_history = history;
  o.growth_interval = growth_interval;
  return o;
}

TEST(GradScalerPredictive, ScriptedAmaxSequenceGetsTheLargestSafePowerOfTwo) {
  GradScaler scaler(predictive(/*history=*/4, /*growth_interval=*/5));
  F16Rig rig;
  std::deque<double> window;  // the test's own record of the last 4 clean amaxes
  std::int64_t skipped = 0;
  std::int64_t steps_taken = 0;
  // Runs one iteration and checks what must hold after it.
  const auto run = [&](double amax) {
    const double used = scaler.get_scale();
    const bool ran = rig.iterate(scaler, amax);
    if (ran) {
      ++steps_taken;
      window.push_back(rig.measured);
      if (window.size() > 4) window.pop_front();
      EXPECT_EQ(scaler.amax_history(), std::vector<double>(window.begin(), window.end()));
      const double peak = *std::max_element(window.begin(), window.end());
      // The largest power of two within the (possibly widened) margin, and never past f16.
      EXPECT_EQ(scaler.get_scale(), largest_safe_scale(peak, 8.0 * scaler.extra_margin()))
          << "amax " << amax;
      EXPECT_LE(scaler.get_scale() * peak, kF16Max / 8.0);
    } else {
      ++skipped;
      EXPECT_EQ(scaler.get_scale(), used * 0.5) << "an overflow backs off";
    }
    EXPECT_EQ(scaler.stats().skipped_steps, skipped);
    EXPECT_EQ(rig.opt.steps(), steps_taken);
    return ran;
  };

  // 1e-3: from the initial 2^16 straight to the prediction, 2^22 (2^22 * 1e-3 * 8 = 33554 and
  // 2^23 would give 67109 > 65504), held while the gradients stay there.
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(run(1e-3));
  EXPECT_EQ(scaler.get_scale(), pow2(22));
  EXPECT_EQ(scaler.extra_margin(), 1.0);

  // A one-step spike to 10: overflows at 2^22, skipped, scale halves, history untouched.
  const std::vector<double> before = scaler.amax_history();
  EXPECT_FALSE(run(10.0));
  EXPECT_EQ(scaler.get_scale(), pow2(21));
  EXPECT_EQ(scaler.amax_history(), before);
  EXPECT_EQ(scaler.state().pending_overflow_scale, pow2(22));
  // Back at 1e-3 the history would return to 2^22, the scale that just overflowed: the margin
  // doubles instead and the scale stays 2^21 ...
  EXPECT_TRUE(run(1e-3));
  EXPECT_EQ(scaler.extra_margin(), 2.0);
  EXPECT_EQ(scaler.get_scale(), pow2(21));
  EXPECT_EQ(scaler.state().pending_overflow_scale, 0.0);
  // ... until growth_interval (5) clean iterations have passed: then 2^22 again.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(run(1e-3));
  EXPECT_EQ(scaler.get_scale(), pow2(21));
  EXPECT_TRUE(run(1e-3));
  EXPECT_EQ(scaler.extra_margin(), 1.0);
  EXPECT_EQ(scaler.get_scale(), pow2(22));

  // A lasting jump to 10: every scale from 2^22 down to 2^13 overflows f16 (10 * 2^13 = 81920);
  // ten skipped iterations, then a clean one at 2^12 measures 10, and the prediction (512:
  // 512 * 10 * 8 = 40960) is far below the last overflowing scale: the gradients grew, the proxy
  // was right, no extra margin.
  const std::int64_t skipped_before = skipped;
  for (int guard = 0; guard < 40 && !run(10.0); ++guard) {
  }
  EXPECT_EQ(skipped - skipped_before, 10);
  EXPECT_EQ(scaler.extra_margin(), 1.0);
  EXPECT_EQ(scaler.get_scale(), 512.0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(run(10.0));
  EXPECT_EQ(scaler.get_scale(), 512.0);

  // Down to 1e-6: the 10s stay in the 4-entry history for 3 iterations, then the scale jumps to
  // 2^32 (2^32 * 1e-6 * 8 = 34360).
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(run(1e-6));
    EXPECT_EQ(scaler.get_scale(), 512.0) << i;
  }
  EXPECT_TRUE(run(1e-6));
  EXPECT_EQ(scaler.get_scale(), pow2(32));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(run(1e-6));
  EXPECT_EQ(scaler.get_scale(), pow2(32));
  EXPECT_EQ(scaler.stats().steps, steps_taken + skipped);
}

TEST(GradScalerPredictive, UnmeasuredOverflowWidensTheMarginAndProbesOncePerInterval) {
  // The unmeasured gradients are 20x the measured ones, beyond the 8x margin: the first
  // prediction overflows, then the scale settles one power of two lower, and the higher one is
  // probed again only every growth_interval (10) clean iterations. Known answer: with amax 2^-7
  // the prediction is 2^19 (2^19 * 2^-7 * 8 = 32768); 20 * 2^-7 * 2^19 = 81920 overflows, 2^18
  // gives 40960 and fits. Iterations 1, 12, 23, 34 (0-based) overflow.
  GradScalerOptions o = predictive(16, 10);
  o.init_scale = 1024.0;
  GradScaler scaler(o);
  F16Rig rig;
  std::vector<int> overflowed;
  for (int i = 0; i < 44; ++i) {
    if (!rig.iterate(scaler, std::ldexp(1.0, -7), /*hidden=*/20.0)) overflowed.push_back(i);
    const double s = scaler.get_scale();
    EXPECT_TRUE(i == 0 || s == pow2(18) || s == pow2(19)) << i << ": " << s;
  }
  EXPECT_EQ(overflowed, (std::vector<int>{1, 12, 23, 34}));
  EXPECT_EQ(scaler.stats().skipped_steps, 4);
  EXPECT_EQ(scaler.get_scale(), pow2(18));
  EXPECT_EQ(scaler.extra_margin(), 2.0);

  // The same gradients under dynamic scaling with the same growth interval: it climbs from 2^10
  // by trial (one doubling per 10 clean iterations) and has not reached the safe 2^18 by then.
  GradScaler dynamic({.init_scale = 1024.0, .growth_interval = 10});
  F16Rig rig_d;
  for (int i = 0; i < 44; ++i) rig_d.iterate(dynamic, std::ldexp(1.0, -7), 20.0);
  EXPECT_EQ(dynamic.get_scale(), pow2(14));
  EXPECT_TRUE(dynamic.amax_history().empty());  // dynamic mode measures nothing
  EXPECT_EQ(dynamic.extra_margin(), 1.0);
}

TEST(GradScalerPredictive, FirstOverflowBeforeAnyMeasurementOnlyBacksOff) {
  // amax 1 at the default 2^16: 65536 > 65504 overflows before anything was measured. At 2^15
  // the measurement says 2^12 (2^12 * 8 = 32768), below the overflowing 2^16: no extra margin.
  GradScaler scaler(predictive());
  F16Rig rig;
  EXPECT_FALSE(rig.iterate(scaler, 1.0));
  EXPECT_EQ(scaler.get_scale(), pow2(15));
  EXPECT_TRUE(scaler.amax_history().empty());
  EXPECT_TRUE(rig.iterate(scaler, 1.0));
  EXPECT_EQ(scaler.amax_history(), std::vector<double>{1.0});
  EXPECT_EQ(scaler.get_scale(), pow2(12));
  EXPECT_EQ(scaler.extra_margin(), 1.0);
}

TEST(GradScalerPredictive, MarginAndHistoryLengthAreHonoured) {
  // Margin 1: the largest scaled gradient may reach 65504 itself. amax 3: 2^14 * 3 = 49152.
  GradScalerOptions o = predictive(2);
  o.init_scale = 1.0;
  o.predictive_margin = 1.0;
  GradScaler scaler(o);
  F16Rig rig;
  EXPECT_TRUE(rig.iterate(scaler, 3.0));
  EXPECT_EQ(scaler.get_scale(), pow2(14));
  // A non-power-of-two margin: 3 * 3 * s <= 65504 gives 2^12 (36864).
  o.predictive_margin = 3.0;
  GradScaler m3(o);
  F16Rig rig3;
  EXPECT_TRUE(rig3.iterate(m3, 3.0));
  EXPECT_EQ(m3.get_scale(), pow2(12));
  // History 2: an 8 sets the scale (2^11: 2048 * 8 * 3 = 49152) and is forgotten two clean
  // iterations later (2^15: 32768 * 0.5 * 3 = 49152).
  EXPECT_TRUE(rig3.iterate(m3, 8.0));
  EXPECT_EQ(m3.get_scale(), pow2(11));
  EXPECT_TRUE(rig3.iterate(m3, 0.5));
  EXPECT_EQ(m3.get_scale(), pow2(11));
  EXPECT_TRUE(rig3.iterate(m3, 0.5));
  EXPECT_EQ(m3.amax_history(), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(m3.get_scale(), pow2(15));
}

TEST(GradScalerPredictive, ClampsToThePowersOfTwoInsideTheRange) {
  F16Rig rig;
  GradScalerOptions o = predictive();
  o.init_scale = 600.0;
  o.max_scale = 1000.0;  // the prediction for 1e-3 (2^22) is clamped to 512, not 1000
  GradScaler capped(o);
  EXPECT_TRUE(rig.iterate(capped, 1e-3));
  EXPECT_EQ(capped.get_scale(), 512.0);

  o = predictive();
  o.min_scale = 3.0;
  o.init_scale = 3.0;
  // amax 3333 asks for 2 (2 * 3333 * 8 = 53333); the smallest power of two >= min_scale 3 is 4.
  GradScaler floored(o);
  F16Rig rig2;
  EXPECT_TRUE(rig2.iterate(floored, 1e4 / 3.0));  // scaled 1e4: fits f16
  EXPECT_EQ(floored.get_scale(), 4.0);

  o.max_scale = 3.0;  // [3, 3] holds no power of two: the bound itself
  GradScaler pinned(o);
  F16Rig rig3;
  EXPECT_TRUE(rig3.iterate(pinned, 1.0));
  EXPECT_EQ(pinned.get_scale(), 3.0);
}

TEST(GradScalerPredictive, HysteresisDelaysTheBackoff) {
  GradScalerOptions o = predictive();
  o.hysteresis = 2;
  GradScaler scaler(o);
  F16Rig rig;
  EXPECT_TRUE(rig.iterate(scaler, 1e-3));
  ASSERT_EQ(scaler.get_scale(), pow2(22));
  EXPECT_FALSE(rig.iterate(scaler, 10.0));  // tolerated: no backoff, nothing pending
  EXPECT_EQ(scaler.get_scale(), pow2(22));
  EXPECT_EQ(scaler.state().pending_overflow_scale, 0.0);
  EXPECT_FALSE(rig.iterate(scaler, 10.0));  // the second one backs off
  EXPECT_EQ(scaler.get_scale(), pow2(21));
  EXPECT_EQ(scaler.state().pending_overflow_scale, pow2(22));
  EXPECT_EQ(scaler.stats().skipped_steps, 2);
}

TEST(GradScalerPredictive, ZeroGradientsCarryNoInformation) {
  GradScaler scaler(predictive());
  F16Rig rig;
  EXPECT_TRUE(rig.iterate(scaler, 0.0));
  EXPECT_EQ(scaler.get_scale(), 65536.0);  // unchanged
  EXPECT_EQ(scaler.amax_history(), std::vector<double>{0.0});
  EXPECT_TRUE(rig.iterate(scaler, 0.25));
  EXPECT_EQ(scaler.get_scale(), pow2(14));  // 2^14 * 0.25 * 8 = 32768
}

TEST(GradScalerPredictive, SeveralOptimizersShareTheLargestAmax) {
  GradScalerOptions o = predictive();
  o.init_scale = 1024.0;
  GradScaler scaler(o);
  F16Rig small, large;
  small.produce(scaler, 1e-3, 1.0);
  large.produce(scaler, 2.0, 1.0);
  EXPECT_TRUE(scaler.step(small.opt));
  EXPECT_TRUE(scaler.step(large.opt));
  scaler.update();
  EXPECT_EQ(scaler.amax_history(), std::vector<double>{2.0});
  EXPECT_EQ(scaler.get_scale(), pow2(11));  // 2048 * 2 * 8 = 32768
  // One optimizer overflowing makes the whole iteration an overflow: nothing is recorded.
  small.produce(scaler, 1e-3, 1.0);
  large.produce(scaler, 100.0, 1.0);  // 100 * 2048 overflows f16
  EXPECT_TRUE(scaler.step(small.opt));
  EXPECT_FALSE(scaler.step(large.opt));
  scaler.update();
  EXPECT_EQ(scaler.amax_history(), std::vector<double>{2.0});
  EXPECT_EQ(scaler.get_scale(), pow2(10));
}

TEST(GradScalerPredictive, ExplicitScaleStillRecordsTheMeasurement) {
  GradScaler scaler(predictive());
  F16Rig rig;
  rig.produce(scaler, 0.5, 1.0);
  EXPECT_TRUE(scaler.step(rig.opt));
  scaler.update(1000.0);
  EXPECT_EQ(scaler.get_scale(), 1000.0);
  EXPECT_EQ(scaler.amax_history(), std::vector<double>{0.5});
  EXPECT_EQ(scaler.growth_tracker(), 0);  // counters untouched, as in dynamic mode
}

TEST(GradScalerPredictive, DynamicModeMeasuresNothingAndIsUnchanged) {
  // The same overflow pattern through a default (dynamic) scaler and one with explicit dynamic
  // options: identical scales; no amax history, no extra margin.
  GradScaler a;
  GradScalerOptions o;
  o.mode = ScalingMode::dynamic;
  o.predictive_history = 3;  // ignored in dynamic mode
  o.growth_interval = 3;
  GradScaler b(o);
  GradScaler c({.growth_interval = 3});
  F16Rig ra, rb, rc;
  for (double amax : {1e-3, 1e-3, 10.0, 1e-3, 1e-3, 1e-3, 1e-3, 1.0}) {
    ra.iterate(a, amax);
    rb.iterate(b, amax);
    rc.iterate(c, amax);
    EXPECT_EQ(b.get_scale(), c.get_scale());
    EXPECT_TRUE(b.amax_history().empty());
    EXPECT_EQ(b.extra_margin(), 1.0);
    EXPECT_EQ(b.state().pending_overflow_scale, 0.0);
  }
  EXPECT_EQ(c.stats().scale_history,
            (std::vector<double>{65536, 65536, 32768, 32768, 32768, 65536, 65536, 32768}));
  EXPECT_TRUE(a.amax_history().empty());
}

TEST(GradScalerPredictive, BadOptionsAreValueErrors) {
  const auto expect_bad = [](auto mutate) {
    GradScalerOptions o = predictive();
    mutate(o);
    EXPECT_THROW(GradScaler{o}, ValueError);
    o.mode = ScalingMode::dynamic;  // validated in both modes
    EXPECT_THROW(GradScaler{o}, ValueError);
  };
  expect_bad([](GradScalerOptions& o) { o.predictive_history = 0; });
  expect_bad([](GradScalerOptions& o) { o.predictive_history = 1000001; });
  expect_bad([](GradScalerOptions& o) { o.predictive_margin = 0.5; });
  expect_bad([](GradScalerOptions& o) { o.predictive_margin = 0.0; });
  expect_bad([](GradScalerOptions& o) { o.predictive_margin = -8.0; });
  expect_bad([](GradScalerOptions& o) { o.predictive_margin = std::nan(""); });
  expect_bad([](GradScalerOptions& o) { o.predictive_margin = HUGE_VAL; });
  GradScalerOptions bad_mode = predictive();
  bad_mode.mode = static_cast<ScalingMode>(7);
  EXPECT_THROW(GradScaler{bad_mode}, ValueError);
  GradScalerOptions ok = predictive(1);
  ok.predictive_margin = 1.0;
  EXPECT_NO_THROW(GradScaler{ok});

  EXPECT_EQ(parse_scaling_mode("dynamic"), ScalingMode::dynamic);
  EXPECT_EQ(parse_scaling_mode("predictive"), ScalingMode::predictive);
  EXPECT_STREQ(name(ScalingMode::predictive), "predictive");
  try {
    parse_scaling_mode("Predictive");
    FAIL() << "accepted an unknown mode";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic or predictive"), std::string::npos) << e.what();
  }
}

std::uint64_t bits(double d) { return std::bit_cast<std::uint64_t>(d); }

void expect_same_predictive_state(const GradScalerState& a, const GradScalerState& b) {
  EXPECT_EQ(bits(a.scale), bits(b.scale));
  EXPECT_EQ(a.growth_tracker, b.growth_tracker);
  EXPECT_EQ(a.hysteresis_left, b.hysteresis_left);
  EXPECT_EQ(a.options.mode, b.options.mode);
  EXPECT_EQ(a.options.predictive_history, b.options.predictive_history);
  EXPECT_EQ(bits(a.options.predictive_margin), bits(b.options.predictive_margin));
  EXPECT_EQ(a.options.growth_interval, b.options.growth_interval);
  ASSERT_EQ(a.amax_history.size(), b.amax_history.size());
  for (std::size_t i = 0; i < a.amax_history.size(); ++i) {
    EXPECT_EQ(bits(a.amax_history[i]), bits(b.amax_history[i])) << i;
  }
  EXPECT_EQ(bits(a.extra_margin), bits(b.extra_margin));
  EXPECT_EQ(bits(a.pending_overflow_scale), bits(b.pending_overflow_scale));
  EXPECT_EQ(a.stats.steps, b.stats.steps);
  EXPECT_EQ(a.stats.skipped_steps, b.stats.skipped_steps);
  EXPECT_EQ(a.stats.scale_history, b.stats.scale_history);
}

/// Amaxes that need all 17 digits (f16-rounded thirds at odd scales), an overflow to leave a
/// pending scale, and a widened margin.
const double kScript[] = {1.0 / 3.0, 1e-3, 10.0, 1e-3 / 3.0, 1e-3, 7e-4, 10.0};

TEST(GradScalerPredictive, SaveLoadAndJsonResumeTheSameTrajectory) {
  GradScalerOptions o = predictive(3, 4);
  o.predictive_margin = 5.0;
  o.hysteresis = 2;
  GradScaler a(o);
  F16Rig rig_a;
  for (double amax : kScript) rig_a.iterate(a, amax);
  ASSERT_GT(a.state().pending_overflow_scale + (a.extra_margin() - 1.0), 0.0);
  ASSERT_EQ(a.amax_history().size(), 3u);

  const std::string json = a.to_json();
  const GradScalerState back = GradScaler::from_json(json);
  expect_same_predictive_state(a.state(), back);
  EXPECT_EQ(to_json(back), json);
  EXPECT_NE(json.find(R"("mode":"predictive")"), std::string::npos) << json;

  GradScaler b;  // default (dynamic) options: load_state brings a's mode and history
  b.load_state(back);
  expect_same_predictive_state(a.state(), b.state());
  F16Rig rig_b;
  for (int round = 0; round < 3; ++round) {
    for (double amax : kScript) {
      EXPECT_EQ(rig_a.iterate(a, amax), rig_b.iterate(b, amax));
      EXPECT_EQ(a.get_scale(), b.get_scale());
      EXPECT_EQ(a.extra_margin(), b.extra_margin());
    }
  }
  expect_same_predictive_state(a.state(), b.state());
}

TEST(GradScalerPredictive, VersionOneJsonLoadsAsDynamic) {
  // Text as a scaler wrote it before predictive scaling existed: version 1, no predictive keys.
  GradScaler dynamic({.init_scale = 1024.0, .growth_interval = 3});
  F16Rig rig;
  for (double amax : {1e-3, 1.0, 1e-3, 1e-3}) rig.iterate(dynamic, amax);
  std::string v1 = dynamic.to_json();
  const auto cut = [&](const std::string& from, const std::string& to) {
    const std::size_t at = v1.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    v1.replace(at, from.size(), to);
  };
  cut(R"("version":2)", R"("version":1)");
  cut(R"(,"mode":"dynamic","predictive_history":16,"predictive_margin":8)", "");
  cut(R"(,"amax_history":[],"extra_margin":1,"pending_overflow_scale":0)", "");
  const GradScalerState old = GradScaler::from_json(v1);
  EXPECT_EQ(old.options.mode, ScalingMode::dynamic);
  EXPECT_EQ(old.options.predictive_history, 16u);
  EXPECT_EQ(old.options.predictive_margin, 8.0);
  EXPECT_EQ(old.scale, dynamic.get_scale());
  EXPECT_EQ(old.stats.scale_history, dynamic.stats().scale_history);
  EXPECT_EQ(to_json(old), dynamic.to_json());  // rewritten as version 2, otherwise the same

  // Version 1 with version-2 keys, or version 2 without them, is malformed.
  std::string mixed = dynamic.to_json();
  mixed.replace(mixed.find(R"("version":2)"), 11, R"("version":1)");
  EXPECT_THROW((void)GradScaler::from_json(mixed), ValueError);
  std::string missing = v1;
  missing.replace(missing.find(R"("version":1)"), 11, R"("version":2)");
  EXPECT_THROW((void)GradScaler::from_json(missing), ValueError);
}

TEST(GradScalerPredictive, InvalidPredictiveStateIsRefused) {
  GradScalerOptions o = predictive(3);
  GradScaler scaler(o);
  F16Rig rig;
  for (double amax : {1e-3, 2e-3}) rig.iterate(scaler, amax);
  const std::string good = scaler.to_json();
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const std::size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<std::string> bad = {
      replaced(R"("mode":"predictive")", R"("mode":"fixed")"),
      replaced(R"("mode":"predictive")", R"("mode":1)"),
      replaced(R"("predictive_history":3)", R"("predictive_history":0)"),
      replaced(R"("predictive_history":3)", R"("predictive_history":1)"),  // 2 entries > 1
      replaced(R"("predictive_margin":8)", R"("predictive_margin":0.5)"),
      replaced(R"("predictive_margin":8)", R"("predictive_margin":"nan")"),
      replaced(R"("amax_history":[)", R"("amax_history":["nan",)"),
      replaced(R"("amax_history":[)", R"("amax_history":[-1,)"),
      replaced(R"("amax_history":[)", R"("amax_history":[0.1,)"),  // not an f32 value
      replaced(R"("amax_history":[)", R"("amax_history":{)"),
      replaced(R"("extra_margin":1)", R"("extra_margin":3)"),  // not a power of two
      replaced(R"("extra_margin":1)", R"("extra_margin":0.5)"),
      replaced(R"("pending_overflow_scale":0)", R"("pending_overflow_scale":-2)"),
      replaced(R"("mode":"predictive")", R"("mode":"dynamic")"),  // dynamic with a history
      replaced(R"(,"pending_overflow_scale":0)", ""),
  };
  for (const std::string& text : bad) {
    EXPECT_THROW((void)GradScaler::from_json(text), ValueError) << text;
  }
  EXPECT_NO_THROW((void)GradScaler::from_json(good));
  EXPECT_NO_THROW(
      (void)GradScaler::from_json(replaced(R"("extra_margin":1)", R"("extra_margin":1024)")));
}

}  // namespace
}  // namespace mixprec::amp
