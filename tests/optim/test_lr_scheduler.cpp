// Schedulers against PyTorch's closed-form formulas recomputed in double, hand-checked points,
// the skip-awareness (a step the optimizer did not apply does not advance the schedule), state
// save/load, and argument validation.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/lr_scheduler.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::optim {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr float kBaseLr = 0.1f;

/// A one-parameter SGD: the smallest real optimizer.
struct Fixture {
  Tensor w;
  std::unique_ptr<SGD> opt;
  explicit Fixture(float lr = kBaseLr) {
    w = Tensor::zeros({4});
    w.set_requires_grad();
    opt = std::make_unique<SGD>(std::vector<Tensor>{w}, SgdOptions{.lr = lr});
  }
  /// An update the optimizer applies (steps() + 1).
  void applied_step() {
    w.set_grad(Tensor::ones({4}));
    opt->step();
  }
  /// What a GradScaler does on inf/NaN gradients: no optimizer.step() at all.
  void skipped_step() { opt->zero_grad(); }
};

/// lr_at is the double formula rounded once to f32: allow one f32 rounding plus the error of
/// cos/pow on f32 hyper-parameters (a few ulps).
void expect_schedule(const LRScheduler& s, std::int64_t t_end,
                     const std::function<double(std::int64_t)>& ref) {
  for (std::int64_t t = 0; t <= t_end; ++t) {
    const double want = ref(t);
    ASSERT_NEAR(s.lr_at(t), want, 1e-12 + std::fabs(want) * 4 * traits(DType::f32).epsilon)
        << s.name() << " at step " << t;
  }
}

TEST(LRScheduler, StepLRMatchesClosedForm) {
  Fixture f;
  StepLR s(*f.opt, 7, 0.5f);
  expect_schedule(s, 40, [](std::int64_t t) { return kBaseLr * std::pow(0.5, t / 7); });
  EXPECT_FLOAT_EQ(s.lr_at(6), kBaseLr);
  EXPECT_FLOAT_EQ(s.lr_at(7), kBaseLr * 0.5f);
  EXPECT_FLOAT_EQ(s.lr_at(21), kBaseLr * 0.125f);
}

TEST(LRScheduler, CosineAnnealingMatchesClosedForm) {
  Fixture f;
  constexpr float kEtaMin = 0.001f;
  CosineAnnealingLR s(*f.opt, 50, kEtaMin);
  expect_schedule(s, 100, [](std::int64_t t) {
    return kEtaMin + (double{kBaseLr} - kEtaMin) * (1 + std::cos(kPi * t / 50)) / 2;
  });
  EXPECT_FLOAT_EQ(s.lr_at(0), kBaseLr);
  EXPECT_FLOAT_EQ(s.lr_at(25), (kBaseLr + kEtaMin) / 2);
  EXPECT_FLOAT_EQ(s.lr_at(50), kEtaMin);
}

TEST(LRScheduler, LinearWarmupAloneAndWrappingCosine) {
  {
    Fixture f;
    LinearWarmup s(*f.opt, 10, 0.1f);
    EXPECT_FLOAT_EQ(f.opt->lr(), kBaseLr * 0.1f);  // set at construction, like PyTorch
    expect_schedule(s, 30, [](std::int64_t t) {
      return t >= 10 ? double{kBaseLr} : kBaseLr * (double{0.1f} + (1 - double{0.1f}) * t / 10.0);
    });
  }
  // SequentialLR([LinearLR(0.25, 1.0, total_iters=5), CosineAnnealingLR(T_max=20)], [5]).
  Fixture f;
  auto cosine = std::make_unique<CosineAnnealingLR>(*f.opt, 20);
  LinearWarmup s(*f.opt, 5, 0.25f, std::move(cosine));
  EXPECT_FLOAT_EQ(s.base_lr(), kBaseLr);
  EXPECT_FLOAT_EQ(f.opt->lr(), kBaseLr * 0.25f);
  expect_schedule(s, 25, [](std::int64_t t) {
    if (t < 5) return kBaseLr * (0.25 + 0.75 * t / 5.0);
    return kBaseLr * (1 + std::cos(kPi * (t - 5) / 20)) / 2;
  });
  EXPECT_FLOAT_EQ(s.lr_at(5), kBaseLr);   // the warm-up ends where the cosine starts
  EXPECT_NEAR(s.lr_at(25), 0.0f, 1e-9f);  // cosine's end
}

TEST(LRScheduler, OneCycleMatchesPyTorchFormulas) {
  Fixture f(123.0f);  // ignored: OneCycle sets its own initial lr
  constexpr float kMax = 0.4f;
  constexpr std::int64_t kTotal = 100;
  OneCycleLR s(*f.opt, kMax, kTotal, 0.25f, 20.0f, 1000.0f);
  const double initial = double{kMax} / 20.0, min_lr = initial / 1000.0, peak = 0.25 * kTotal - 1;
  auto anneal = [](double a, double b, double pct) { return b + (a - b) / 2 * (std::cos(kPi * pct) + 1); };
  expect_schedule(s, kTotal, [&](std::int64_t t) {
    return t <= peak ? anneal(initial, kMax, t / peak)
                     : anneal(kMax, min_lr, (t - peak) / (kTotal - 1 - peak));
  });
  // Hand-checked points.
  EXPECT_FLOAT_EQ(f.opt->lr(), kMax / 20.0f);
  EXPECT_FLOAT_EQ(s.lr_at(0), kMax / 20.0f);                    // max_lr / div_factor
  EXPECT_FLOAT_EQ(s.lr_at(24), kMax);                           // pct_start * total - 1
  EXPECT_FLOAT_EQ(s.lr_at(kTotal - 1), kMax / 20.0f / 1000.0f);  // initial / final_div_factor
  EXPECT_THROW(s.lr_at(kTotal + 1), ValueError);                 // PyTorch refuses too
  // Defaults: pct_start 0.3, div 25, final_div 1e4.
  OneCycleLR d(*f.opt, 1.0f, 1000);
  EXPECT_FLOAT_EQ(d.lr_at(0), 1.0f / 25);
  EXPECT_NEAR(d.lr_at(299), 1.0f, 1e-6f);
  EXPECT_FLOAT_EQ(d.lr_at(999), 1.0f / 25 / 1e4f);
}

TEST(LRScheduler, SkippedOptimizerStepDoesNotAdvanceTheSchedule) {
  Fixture f;
  StepLR s(*f.opt, 1, 0.5f);
  f.applied_step();
  s.step();
  EXPECT_EQ(s.last_step(), 1);
  EXPECT_FLOAT_EQ(f.opt->lr(), kBaseLr * 0.5f);
  for (int i = 0; i < 3; ++i) {  // three overflowing iterations in a row
    f.skipped_step();
    s.step();
  }
  EXPECT_EQ(f.opt->steps(), 1);
  EXPECT_EQ(s.last_step(), 1);
  EXPECT_FLOAT_EQ(f.opt->lr(), kBaseLr * 0.5f);
  // optimizer.step() with no gradient at all applies nothing either.
  f.opt->zero_grad();
  f.opt->step();
  s.step();
  EXPECT_EQ(s.last_step(), 1);
  f.applied_step();
  s.step();
  EXPECT_EQ(s.last_step(), 2);
  EXPECT_FLOAT_EQ(f.opt->lr(), kBaseLr * 0.25f);
  // Several updates between two scheduler steps (a per-epoch schedule) advance it by one.
  f.applied_step();
  f.applied_step();
  s.step();
  EXPECT_EQ(s.last_step(), 3);
}

TEST(LRScheduler, WarmupIsNotEatenBySkippedSteps) {
  Fixture f;
  LinearWarmup s(*f.opt, 4, 0.25f);
  // Pattern of an fp16 start: the loss scale overflows on iterations 0, 1 and 3.
  const std::vector<bool> applied{false, false, true, false, true, true, true};
  for (bool a : applied) {
    a ? f.applied_step() : f.skipped_step();
    s.step();
  }
  EXPECT_EQ(s.last_step(), 4);  // four applied updates
  EXPECT_FLOAT_EQ(f.opt->lr(), kBaseLr);
}

TEST(LRScheduler, OptimizerStepsGoingBackwardsIsAStateError) {
  Fixture f;
  const OptimizerState saved = f.opt->state();  // steps = 0
  CosineAnnealingLR s(*f.opt, 10);
  f.applied_step();
  f.applied_step();
  s.step();
  f.opt->load_state(saved);
  EXPECT_THROW(s.step(), StateError);
}

TEST(LRScheduler, StateSaveAndLoadResumesTheSchedule) {
  Fixture a;
  CosineAnnealingLR sa(*a.opt, 20, 0.01f);
  for (int i = 0; i < 5; ++i) {
    a.applied_step();
    sa.step();
  }
  const LRSchedulerState st = sa.state();
  EXPECT_EQ(st.step_count, 5);
  EXPECT_EQ(st.last_optimizer_steps, 5);

  // Resume: build optimizer and scheduler as at the start, then load both states.
  Fixture b;
  CosineAnnealingLR sb(*b.opt, 20, 0.01f);
  b.opt->load_state(a.opt->state());
  sb.load_state(st);
  EXPECT_EQ(sb.last_step(), 5);
  EXPECT_EQ(b.opt->lr(), a.opt->lr());
  b.skipped_step();
  sb.step();  // nothing applied since the save
  EXPECT_EQ(sb.last_step(), 5);
  a.applied_step();
  sa.step();
  b.applied_step();
  sb.step();
  EXPECT_EQ(b.opt->lr(), a.opt->lr());

  EXPECT_THROW(sb.load_state({-1, 0, kBaseLr}), StateError);
  // Built after optimizer.load_state, a scheduler takes the saved current lr as its base: the
  // saved base_lr catches it.
  Fixture late;
  late.opt->load_state(a.opt->state());
  CosineAnnealingLR s_late(*late.opt, 20, 0.01f);
  EXPECT_THROW(s_late.load_state(st), StateError);
  Fixture c;
  OneCycleLR oc(*c.opt, 1.0f, 10);
  EXPECT_THROW(oc.load_state({11, 11, oc.base_lr()}), StateError);  // beyond total_steps
  EXPECT_EQ(oc.last_step(), 0);
  EXPECT_FLOAT_EQ(c.opt->lr(), oc.lr_at(0));
}

/// Runs make() and checks it throws ValueError whose message starts with "<cls>:".
void expect_value_error(const std::string& cls, const std::function<void()>& make) {
  try {
    make();
    ADD_FAILURE() << cls << ": expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(cls + ":", 0), 0u) << e.what();
  }
}

TEST(LRScheduler, BadArgumentsThrowValueErrorNamingTheClass) {
  Fixture f;
  SGD& o = *f.opt;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_value_error("StepLR", [&] { StepLR(o, 0, 0.5f); });
  expect_value_error("StepLR", [&] { StepLR(o, 3, 0.0f); });
  expect_value_error("StepLR", [&] { StepLR(o, 3, nan); });
  expect_value_error("CosineAnnealingLR", [&] { CosineAnnealingLR(o, 0); });
  expect_value_error("CosineAnnealingLR", [&] { CosineAnnealingLR(o, 10, -1.0f); });
  expect_value_error("LinearWarmup", [&] { LinearWarmup(o, 0); });
  expect_value_error("LinearWarmup", [&] { LinearWarmup(o, 5, 0.0f); });
  expect_value_error("LinearWarmup", [&] { LinearWarmup(o, 5, 1.5f); });
  expect_value_error("OneCycleLR", [&] { OneCycleLR(o, 0.0f, 10); });
  expect_value_error("OneCycleLR", [&] { OneCycleLR(o, 1.0f, 0); });
  expect_value_error("OneCycleLR", [&] { OneCycleLR(o, 1.0f, 10, 1.5f); });
  expect_value_error("OneCycleLR", [&] { OneCycleLR(o, 1.0f, 10, 0.3f, 0.0f); });
  expect_value_error("OneCycleLR", [&] { OneCycleLR(o, 1.0f, 10, 0.3f, 25.0f, nan); });
  Fixture other;
  expect_value_error("LinearWarmup", [&] {
    LinearWarmup(o, 5, 0.5f, std::make_unique<StepLR>(*other.opt, 2));
  });
  expect_value_error("LinearWarmup", [&] {
    auto inner = std::make_unique<StepLR>(o, 2);
    f.applied_step();
    inner->step();
    LinearWarmup(o, 5, 0.5f, std::move(inner));
  });
  StepLR s(o, 2);
  expect_value_error("StepLR", [&] { (void)s.lr_at(-1); });
}

}  // namespace
}  // namespace mixprec::optim
