// GradScaler statistics, state save/load (resuming gives the same trajectory), and the JSON round
// trip (bit-exact doubles, strict parsing).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/amp/grad_scaler.h"
#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::amp {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// A parameter and its optimizer, fed hand-made scaled gradients.
struct Rig {
  Tensor p = [] {
    Tensor t = Tensor::full({4}, 1.0f);
    t.set_requires_grad();
    return t;
  }();
  optim::SGD opt{{p}, {.lr = 0.1f}};

  /// One iteration: 'O' puts an Inf in the gradient, 'C' keeps it finite.
  void iterate(GradScaler& scaler, char c) {
    const auto s = static_cast<float>(scaler.get_scale());
    p.set_grad(Tensor::from_vector({s, c == 'O' ? kInf : s, s, s}, {4}));
    p.set_grad_scale(scaler.get_scale());
    scaler.step(opt);
    scaler.update();
  }
};

std::uint64_t bits(double d) { return std::bit_cast<std::uint64_t>(d); }

void expect_same_state(const GradScalerState& a, const GradScalerState& b) {
  EXPECT_EQ(bits(a.scale), bits(b.scale));
  EXPECT_EQ(a.growth_tracker, b.growth_tracker);
  EXPECT_EQ(a.hysteresis_left, b.hysteresis_left);
  const GradScalerOptions& x = a.options;
  const GradScalerOptions& y = b.options;
  EXPECT_EQ(bits(x.init_scale), bits(y.init_scale));
  EXPECT_EQ(bits(x.growth_factor), bits(y.growth_factor));
  EXPECT_EQ(bits(x.backoff_factor), bits(y.backoff_factor));
  EXPECT_EQ(x.growth_interval, y.growth_interval);
  EXPECT_EQ(x.enabled, y.enabled);
  EXPECT_EQ(x.hysteresis, y.hysteresis);
  EXPECT_EQ(x.consecutive_hysteresis, y.consecutive_hysteresis);
  EXPECT_EQ(bits(x.min_scale), bits(y.min_scale));
  EXPECT_EQ(bits(x.max_scale), bits(y.max_scale));
  EXPECT_EQ(x.allow_16bit_grads, y.allow_16bit_grads);
  EXPECT_EQ(x.history_limit, y.history_limit);
  EXPECT_EQ(x.mode, y.mode);
  EXPECT_EQ(x.predictive_history, y.predictive_history);
  EXPECT_EQ(bits(x.predictive_margin), bits(y.predictive_margin));
  EXPECT_EQ(a.amax_history, b.amax_history);
  EXPECT_EQ(bits(a.extra_margin), bits(b.extra_margin));
  EXPECT_EQ(bits(a.pending_overflow_scale), bits(b.pending_overflow_scale));
  EXPECT_EQ(a.stats.steps, b.stats.steps);
  EXPECT_EQ(a.stats.skipped_steps, b.stats.skipped_steps);
  EXPECT_EQ(a.stats.last_overflow_step, b.stats.last_overflow_step);
  ASSERT_EQ(a.stats.scale_history.size(), b.stats.scale_history.size());
  for (std::size_t i = 0; i < a.stats.scale_history.size(); ++i) {
    EXPECT_EQ(bits(a.stats.scale_history[i]), bits(b.stats.scale_history[i])) << i;
  }
}

TEST(GradScalerStats, CountsSkipsAndKeepsHistory) {
  Rig rig;
  GradScaler scaler({.init_scale = 64.0, .history_limit = 3});
  EXPECT_EQ(scaler.stats().last_overflow_step, -1);
  for (char c : std::string("COCOC")) rig.iterate(scaler, c);
  const GradScalerStats& st = scaler.stats();
  EXPECT_EQ(st.steps, 5);
  EXPECT_EQ(st.skipped_steps, 2);
  EXPECT_EQ(st.last_overflow_step, 3);  // 0-based: the 4th iteration overflowed
  EXPECT_EQ(st.scale_history, (std::vector<double>{32, 16, 16}));  // the last 3 of 64,32,32,16,16
  EXPECT_EQ(rig.opt.steps(), 3);
  scaler.update(1000.0);  // an explicit scale is recorded, but is not an iteration
  EXPECT_EQ(scaler.stats().steps, 5);
  EXPECT_EQ(scaler.stats().scale_history.back(), 1000.0);
}

TEST(GradScalerSaveLoad, ResumedScalerFollowsTheSameTrajectory) {
  const GradScalerOptions opts{.init_scale = 1000.0,
                               .growth_factor = 3.0,
                               .backoff_factor = 0.3,
                               .growth_interval = 3,
                               .hysteresis = 2,
                               .min_scale = 10.0};
  Rig rig_a;
  GradScaler a(opts);
  for (char c : std::string("CCCCOCOOC")) rig_a.iterate(a, c);
  ASSERT_NE(a.hysteresis_left(), opts.hysteresis);  // mid-hysteresis: the counter must travel
  ASSERT_NE(a.growth_tracker(), 0);

  GradScaler b;  // default options: load_state brings a's
  b.load_state(a.state());
  expect_same_state(a.state(), b.state());
  Rig rig_b;
  for (char c : std::string("OCCCOOOOCCCCCC")) {
    rig_a.iterate(a, c);
    rig_b.iterate(b, c);
    EXPECT_EQ(a.get_scale(), b.get_scale());
    EXPECT_EQ(a.growth_tracker(), b.growth_tracker());
  }
  expect_same_state(a.state(), b.state());
}

TEST(GradScalerSaveLoad, RefusesMidIterationAndEnabledMismatch) {
  Rig rig;
  GradScaler scaler;
  const GradScalerState saved = scaler.state();
  rig.p.set_grad(Tensor::ones({4}));
  scaler.unscale(rig.opt);
  EXPECT_THROW(scaler.load_state(saved), StateError);
  scaler.update();
  scaler.load_state(saved);
  GradScaler disabled({.enabled = false});
  EXPECT_THROW(disabled.load_state(saved), StateError);
  GradScalerState bad = saved;
  bad.growth_tracker = bad.options.growth_interval;
  EXPECT_THROW(scaler.load_state(bad), ValueError);
  bad = saved;
  bad.options.backoff_factor = 2.0;
  EXPECT_THROW(scaler.load_state(bad), ValueError);
}

TEST(GradScalerJson, RoundTripIsBitExact) {
  GradScaler scaler({.init_scale = 1000.0,
                     .growth_factor = 3.0,
                     .backoff_factor = 0.3,
                     .growth_interval = 2,
                     .hysteresis = 2,
                     .consecutive_hysteresis = true,
                     .min_scale = 0.1,
                     .allow_16bit_grads = true,
                     .history_limit = 50});
  Rig rig;
  for (char c : std::string("CCOOCCCO")) rig.iterate(scaler, c);
  scaler.update(1.0 / 3.0);
  const std::string json = scaler.to_json();
  EXPECT_NE(json.find("\"max_scale\":\"inf\""), std::string::npos) << json;
  const GradScalerState back = GradScaler::from_json(json);
  expect_same_state(scaler.state(), back);
  EXPECT_EQ(to_json(back), json);

  // Doubles that need all 17 digits, and whitespace a reader must accept.
  GradScalerState plain;
  plain.options.max_scale = 1e6;
  plain.stats.scale_history = {0.1, 1e-300, 123456.78901234567};
  std::string text = to_json(plain);
  for (std::size_t at = text.find(','); at != std::string::npos; at = text.find(',', at + 3)) {
    text.insert(at + 1, "\n  ");
  }
  expect_same_state(plain, GradScaler::from_json(text));
  // An escaped character in a string is decoded ("\u006d" is 'm').
  const std::size_t at = text.find("mixprec.GradScaler");
  text.replace(at, 1, "\\u006d");
  expect_same_state(plain, GradScaler::from_json(text));
}

TEST(GradScalerJson, MalformedTextIsAValueError) {
  const std::string good = to_json(GradScalerState{});
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const std::size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<std::string> bad = {
      "",
      good.substr(0, good.size() - 1),             // truncated
      good + "x",                                  // trailing text
      replaced("\"version\":2", "\"version\":3"),  // unknown version
      replaced("\"scale\":", "\"scal\":"),         // unknown and missing key
      replaced("\"growth_tracker\":0", "\"growth_tracker\":0.5"),
      replaced("\"enabled\":true", "\"enabled\":1"),
      replaced("\"growth_factor\":2", "\"growth_factor\":0.5"),  // parses, invalid state
      replaced("\"scale_history\":[]", "\"scale_history\":{}"),
      replaced("\"mixprec.GradScaler\"", "\"other\""),
      replaced("\"steps\":0", "\"steps\":0,\"steps\":0"),  // duplicate key
  };
  for (const std::string& text : bad) {
    EXPECT_THROW((void)GradScaler::from_json(text), ValueError) << text;
  }
  EXPECT_NO_THROW((void)GradScaler::from_json(good));
}

}  // namespace
}  // namespace mixprec::amp
