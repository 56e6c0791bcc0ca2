// Optimizers against a double-precision re-implementation of PyTorch's formulas, hyper-parameter
// validation, memory accounting, state save/load, and parameters without gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/memory.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/adam.h"
#include "mixprec/optim/sgd.h"

namespace mixprec::optim {
namespace {

constexpr int kSteps = 5;
constexpr std::int64_t kN = 37;

Tensor leaf(const std::vector<float>& values, DType dtype = DType::f32) {
  Tensor t = Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())}, dtype);
  t.set_requires_grad();
  return t;
}

std::vector<float> initial_values() {
  std::vector<float> v(kN);
  for (std::int64_t j = 0; j < kN; ++j) v[j] = 0.5f + 0.03f * static_cast<float>(j) * (j % 2 ? -1.0f : 1.0f);
  return v;
}

/// Hand-fed gradient of step k (mixed signs and magnitudes, some exactly zero).
std::vector<float> gradient(int k) {
  std::vector<float> g(kN);
  for (std::int64_t j = 0; j < kN; ++j) {
    g[j] = j % 11 == 3 ? 0.0f : std::sin(0.7f * static_cast<float>(j) + 1.3f * static_cast<float>(k)) * (1.0f + 0.1f * static_cast<float>(j));
  }
  return g;
}

/// PyTorch's update of one parameter vector in double, given hand-fed gradients.
using Reference = std::function<void(std::vector<double>& p, const std::vector<double>& g, int t)>;

Reference sgd_reference(const SgdOptions& o) {
  auto buf = std::make_shared<std::vector<double>>();
  return [o, buf](std::vector<double>& p, const std::vector<double>& grad, int t) {
    if (buf->empty()) buf->assign(p.size(), 0.0);
    for (std::size_t j = 0; j < p.size(); ++j) {
      double g = grad[j] + double{o.weight_decay} * p[j];
      if (o.momentum != 0.0f) {
        double& b = (*buf)[j];
        b = t == 1 ? g : double{o.momentum} * b + (1.0 - double{o.dampening}) * g;
        g = o.nesterov ? g + double{o.momentum} * b : b;
      }
      p[j] -= double{o.lr} * g;
    }
  };
}

Reference adam_reference(const AdamOptions& o) {
  auto m = std::make_shared<std::vector<double>>();
  auto v = std::make_shared<std::vector<double>>();
  return [o, m, v](std::vector<double>& p, const std::vector<double>& grad, int t) {
    if (m->empty()) m->assign(p.size(), 0.0), v->assign(p.size(), 0.0);
    const double lr = o.lr, b1 = o.beta1, b2 = o.beta2, wd = o.weight_decay;
    for (std::size_t j = 0; j < p.size(); ++j) {
      double g = grad[j];
      if (o.decoupled_weight_decay) p[j] *= 1.0 - lr * wd; else g += wd * p[j];
      (*m)[j] = b1 * (*m)[j] + (1.0 - b1) * g;
      (*v)[j] = b2 * (*v)[j] + (1.0 - b2) * g * g;
      const double m_hat = (*m)[j] / (1.0 - std::pow(b1, t));
      const double v_hat = (*v)[j] / (1.0 - std::pow(b2, t));
      p[j] -= lr * m_hat / (std::sqrt(v_hat) + double{o.eps});
    }
  };
}

/// Runs kSteps of `opt` on a parameter of param_dtype with gradients of grad_dtype and compares
/// the f32 trajectory (the master for 16-bit parameters) with the double reference at every step.
/// Tolerance: 8 f32 epsilons relative (~1e-6; each step adds a few roundings of p and of the
/// update, ~2 epsilons after 5 steps as measured, so 4x margin) plus 1e-7 absolute, about one f32
/// epsilon of the O(1) parameter scale, for elements that pass near zero, where an earlier rounding
/// of a larger value dominates. A wrong formula moves p by ~lr (1e-2), far outside either bound.
void check_trajectory(const std::function<std::unique_ptr<Optimizer>(Tensor)>& make,
                      Reference reference, DType param_dtype, DType grad_dtype) {
  Tensor p = leaf(initial_values(), param_dtype);
  const std::vector<float> start = p.to_vector();  // after rounding to param_dtype
  std::vector<double> ref(start.begin(), start.end());
  std::unique_ptr<Optimizer> opt = make(p);
  for (int t = 1; t <= kSteps; ++t) {
    const Tensor g = Tensor::from_vector(gradient(t), {kN}, grad_dtype);
    p.set_grad(g);
    opt->step();
    const std::vector<float> gv = g.to_vector();  // the gradient as the optimizer read it
    reference(ref, std::vector<double>(gv.begin(), gv.end()), t);
    const std::vector<float> got = param_dtype == DType::f32 ? p.to_vector() : opt->master(0).to_vector();
    const std::vector<float> param = p.to_vector();
    for (std::int64_t j = 0; j < kN; ++j) {
      const double tol = 1e-7 + std::abs(ref[j]) * 8 * traits(DType::f32).epsilon;
      ASSERT_NEAR(got[j], ref[j], tol) << opt->name() << " step " << t << " element " << j;
      // A 16-bit parameter is the round-to-nearest-even copy of its master.
      ASSERT_EQ(param[j], Tensor::from_vector({got[j]}, {1}, param_dtype).item()) << j;
    }
  }
  EXPECT_EQ(opt->steps(), kSteps);
}

struct Case {
  DType param, grad;
};
const Case kCases[] = {{DType::f32, DType::f32}, {DType::f32, DType::bf16}, {DType::f32, DType::f16},
                       {DType::bf16, DType::bf16}, {DType::f16, DType::f32}};

TEST(OptimTrajectory, SgdMatchesPyTorchFormulas) {
  const SgdOptions configs[] = {{.lr = 0.1f},
                                {.lr = 0.05f, .momentum = 0.9f},
                                {.lr = 0.05f, .momentum = 0.8f, .dampening = 0.3f, .weight_decay = 0.01f},
                                {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.1f, .nesterov = true}};
  for (const SgdOptions& o : configs) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(name(c.param)) + " param, " + name(c.grad) + " grad, momentum " + std::to_string(o.momentum));
      check_trajectory([&](Tensor p) { return std::make_unique<SGD>(std::vector<Tensor>{p}, o); },
                       sgd_reference(o), c.param, c.grad);
    }
  }
}

TEST(OptimTrajectory, AdamAndAdamWMatchPyTorchFormulas) {
  const AdamOptions configs[] = {{.lr = 0.01f},
                                 {.lr = 0.02f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-6f, .weight_decay = 0.1f},
                                 {.lr = 0.02f, .weight_decay = 0.1f, .decoupled_weight_decay = true}};
  for (const AdamOptions& o : configs) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(name(c.param)) + " param, " + name(c.grad) + " grad, decoupled " + std::to_string(o.decoupled_weight_decay));
      check_trajectory([&](Tensor p) { return std::make_unique<Adam>(std::vector<Tensor>{p}, o); },
                       adam_reference(o), c.param, c.grad);
    }
  }
  // The AdamW class is Adam with decoupled decay and PyTorch's default weight_decay of 1e-2.
  AdamOptions w{.lr = 0.02f, .weight_decay = 1e-2f, .decoupled_weight_decay = true};
  check_trajectory([](Tensor p) { return std::make_unique<AdamW>(std::vector<Tensor>{p}, AdamWOptions{.lr = 0.02f}); },
                   adam_reference(w), DType::f32, DType::f32);
}

/// Expects a ValueError whose message starts with "<prefix>: ".
template <class Fn>
void expect_value_error(const std::string& prefix, Fn&& fn) {
  try {
    fn();
    ADD_FAILURE() << "no ValueError for " << prefix;
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(prefix + ": ", 0), 0u) << e.what();
  }
}

TEST(OptimHyper, BadHyperParametersThrowValueErrorNamingTheOptimizer) {
  const std::vector<Tensor> ps{leaf({1.0f, 2.0f})};
  expect_value_error("SGD", [&] { SGD(ps, {.lr = -1.0f}); });
  expect_value_error("SGD", [&] { SGD(ps, {.lr = NAN}); });
  expect_value_error("SGD", [&] { SGD(ps, {.momentum = -0.5f}); });
  expect_value_error("SGD", [&] { SGD(ps, {.weight_decay = -1e-3f}); });
  expect_value_error("SGD", [&] { SGD(ps, {.momentum = 0.0f, .nesterov = true}); });
  expect_value_error("SGD", [&] { SGD(ps, {.momentum = 0.9f, .dampening = 0.1f, .nesterov = true}); });
  expect_value_error("Adam", [&] { Adam(ps, {.lr = -1e-3f}); });
  expect_value_error("Adam", [&] { Adam(ps, {.beta1 = 1.0f}); });
  expect_value_error("Adam", [&] { Adam(ps, {.beta2 = -0.1f}); });
  expect_value_error("Adam", [&] { Adam(ps, {.eps = 0.0f}); });
  expect_value_error("Adam", [&] { Adam(ps, {.weight_decay = -0.1f}); });
  expect_value_error("AdamW", [&] { AdamW(ps, {.beta2 = 1.5f}); });
  expect_value_error("AdamW", [&] { AdamW(ps, {.weight_decay = -1.0f}); });
  SGD ok(ps, {.lr = 0.1f});
  expect_value_error("SGD", [&] { ok.set_lr(-0.1f); });
  // Parameter lists: empty, undefined, not requiring grad, the same tensor twice.
  expect_value_error("SGD", [] { SGD(std::vector<Tensor>{}); });
  expect_value_error("Adam", [] { Adam(std::vector<Tensor>{Tensor()}); });
  expect_value_error("AdamW", [] { AdamW({Tensor::from_vector({1.0f}, {1})}); });
  expect_value_error("SGD", [&] { SGD({ps[0], ps[0]}); });
}

TEST(OptimMemory, StateIsFiledUnderOptimizerState) {
  constexpr std::int64_t n = 4096;
  auto state_bytes = [] { return memory_stats().current_of(MemoryCategory::optimizer_state); };
  const std::size_t base = state_bytes();
  Tensor f32 = Tensor::zeros({n}, DType::f32);
  f32.set_requires_grad();
  Tensor bf16 = Tensor::zeros({n}, DType::bf16);
  bf16.set_requires_grad();
  {
    Adam adam({f32});
    EXPECT_EQ(state_bytes() - base, 8u * n);  // exp_avg + exp_avg_sq
  }
  {
    Adam adam({bf16});
    EXPECT_EQ(state_bytes() - base, 12u * n);  // + the fp32 master
  }
  {
    AdamW adamw({bf16}, {}, {.master_weights = MasterWeights::none_stochastic_rounding});
    EXPECT_EQ(state_bytes() - base, 8u * n);
  }
  {
    SGD sgd({f32}, {.momentum = 0.9f});
    EXPECT_EQ(state_bytes() - base, 4u * n);
    SGD plain({bf16});
    EXPECT_EQ(state_bytes() - base, 4u * n + 4u * n);  // plain SGD on bf16: just the master
  }
  EXPECT_EQ(state_bytes(), base);
}

/// Snapshot of an optimizer's state (tensor values copied) for a later load_state.
OptimizerState snapshot(const Optimizer& opt) {
  OptimizerState s = opt.state();
  for (auto& entry : s.tensors) entry.second = entry.second.clone();
  return s;
}

std::vector<std::uint8_t> bits_of(const Tensor& t) {
  std::vector<std::uint8_t> out(t.nbytes());
  std::memcpy(out.data(), t.data_ptr(), t.nbytes());
  return out;
}

/// Two runs over identical parameters: one straight through, one that resumes from a snapshot in
/// a fresh optimizer; every parameter and state bit must agree.
void check_round_trip(const std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>& make,
                      DType dtype) {
  auto params = [&] {
    std::vector<Tensor> ps{Tensor::randn({257}, 1, dtype), Tensor::randn({3, 5}, 2, dtype)};
    for (Tensor& p : ps) p.set_requires_grad();
    return ps;
  };
  auto feed = [](const std::vector<Tensor>& ps, int t) {
    for (std::size_t i = 0; i < ps.size(); ++i) {
      // Parameter 1 gets no gradient at step 2, so the per-parameter step counts differ.
      if (i == 1 && t == 2) continue;
      ps[i].set_grad(Tensor::randn(ps[i].shape(), 100 + 10 * t + i, DType::bf16));
    }
  };
  std::vector<Tensor> a = params();
  std::unique_ptr<Optimizer> first = make(a);
  for (int t = 1; t <= 3; ++t) feed(a, t), first->step(), first->zero_grad();
  const OptimizerState saved = snapshot(*first);
  std::vector<Tensor> b = params();
  for (std::size_t i = 0; i < b.size(); ++i) std::memcpy(b[i].data_ptr(), a[i].data_ptr(), a[i].nbytes());
  first->set_lr(first->lr() * 0.5f);
  for (int t = 4; t <= 6; ++t) feed(a, t), first->step(), first->zero_grad();

  std::unique_ptr<Optimizer> second = make(b);
  second->load_state(saved);
  EXPECT_EQ(second->steps(), 3);
  second->set_lr(second->lr() * 0.5f);
  for (int t = 4; t <= 6; ++t) feed(b, t), second->step(), second->zero_grad();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(bits_of(a[i]), bits_of(b[i])) << i;
  const auto sa = first->state_tensors(), sb = second->state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t k = 0; k < sa.size(); ++k) {
    EXPECT_EQ(sa[k].first, sb[k].first);
    EXPECT_EQ(bits_of(sa[k].second), bits_of(sb[k].second)) << sa[k].first;
  }
  EXPECT_EQ(first->state_scalars(), second->state_scalars());
}

TEST(OptimState, SaveLoadRoundTripIsBitExact) {
  check_round_trip([](std::vector<Tensor> ps) { return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.01f, .weight_decay = 0.1f}); }, DType::f32);
  check_round_trip([](std::vector<Tensor> ps) { return std::make_unique<AdamW>(ps, AdamWOptions{.lr = 0.01f}); }, DType::bf16);
  check_round_trip([](std::vector<Tensor> ps) { return std::make_unique<SGD>(ps, SgdOptions{.lr = 0.1f, .momentum = 0.9f, .nesterov = true}); }, DType::f16);
  check_round_trip([](std::vector<Tensor> ps) {
    return std::make_unique<AdamW>(ps, AdamWOptions{.lr = 0.01f}, OptimizerOptions{.master_weights = MasterWeights::none_stochastic_rounding, .seed = 7});
  }, DType::bf16);
}

TEST(OptimState, NamesAreStableAndMismatchesThrow) {
  Tensor p = leaf({1.0f, 2.0f}, DType::bf16);
  Tensor q = leaf({3.0f});
  Adam adam({p, q});
  std::vector<std::string> names;
  for (const auto& [key, t] : adam.state_tensors()) {
    names.push_back(key);
    EXPECT_EQ(t.category(), MemoryCategory::optimizer_state) << key;
    EXPECT_EQ(t.dtype(), DType::f32) << key;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"param.0.master", "param.0.exp_avg", "param.0.exp_avg_sq",
                                             "param.1.exp_avg", "param.1.exp_avg_sq"}));
  OptimizerState s = snapshot(adam);
  s.tensors.pop_back();
  EXPECT_THROW(adam.load_state(s), StateError);
  SGD sgd({p, q}, {.momentum = 0.9f});
  EXPECT_THROW(sgd.load_state(snapshot(adam)), StateError);  // wrong kind of optimizer
  OptimizerState bad = snapshot(adam);
  bad.scalars[0].second = -1.0;  // "steps"
  EXPECT_THROW(adam.load_state(bad), StateError);
}

// step() updates its parameters in multi-tensor kernel calls of 48: with 100 parameters of
// mixed dtypes and sizes in two groups (two learning rates), some without a gradient at some
// steps (their own step counts, so their own bias corrections), every parameter ends with the
// bits of an optimizer of its own, which updates it alone.
TEST(OptimBatching, ManyParametersEqualOneOptimizerEach) {
  constexpr std::size_t kParams = 100;
  const auto make_params = [] {
    std::vector<Tensor> params;
    for (std::size_t i = 0; i < kParams; ++i) {
      const DType dtype = i % 3 == 0 ? DType::bf16 : i % 3 == 1 ? DType::f32 : DType::f16;
      Tensor p = Tensor::randn({static_cast<std::int64_t>(1 + (i * 37) % 300)}, 1000 + i, dtype, 0.0f, 0.5f);
      p.set_requires_grad();
      params.push_back(p);
    }
    return params;
  };
  const std::vector<Tensor> together = make_params(), alone = make_params();
  AdamW all(together, AdamWOptions{.lr = 1e-2f, .weight_decay = 0.1f});
  std::vector<ParamGroup> groups(2);
  groups[0].name = "slow";
  groups[1].name = "fast";
  groups[1].lr_scale = 3.0f;
  for (std::size_t i = 0; i < kParams; ++i) groups[i % 2].params.push_back(together[i]);
  all.set_param_groups(groups);
  std::vector<std::unique_ptr<AdamW>> each;
  for (std::size_t i = 0; i < kParams; ++i) {
    each.push_back(std::make_unique<AdamW>(std::vector<Tensor>{alone[i]},
                                           AdamWOptions{.lr = i % 2 ? 3e-2f : 1e-2f, .weight_decay = 0.1f}));
  }
  for (int step = 0; step < 3; ++step) {
    for (std::size_t i = 0; i < kParams; ++i) {
      const bool skipped = (i + static_cast<std::size_t>(step)) % 7 == 0;
      const Tensor g = Tensor::randn(together[i].shape(), 50 * step + i, together[i].dtype(), 0.0f, 0.2f);
      together[i].set_grad(skipped ? Tensor() : g);
      alone[i].set_grad(skipped ? Tensor() : g.clone());
    }
    all.step();
    for (auto& opt : each) opt->step();
    for (std::size_t i = 0; i < kParams; ++i) {
      const std::vector<float> a = together[i].to_vector(), b = alone[i].to_vector();
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "parameter " << i << " after step " << step;
    }
  }
}

TEST(OptimNoGrad, ParameterWithoutGradientIsUntouched) {
  Tensor p = leaf({1.0f, -2.0f, 3.0f});
  Tensor q = leaf({4.0f, 5.0f}, DType::bf16);
  AdamW opt({p, q}, {.lr = 0.1f, .weight_decay = 0.5f});
  const auto q_bits = bits_of(q);
  const std::uint64_t q_version = q.version(), p_version = p.version();
  p.set_grad(Tensor::from_vector({0.5f, 0.5f, 0.5f}, {3}));
  opt.step();
  EXPECT_NE(p.to_vector()[0], 1.0f);
  EXPECT_GT(p.version(), p_version);
  EXPECT_EQ(bits_of(q), q_bits);  // not even weight decay touches it
  EXPECT_EQ(q.version(), q_version);
  for (const auto& [key, t] : opt.state_tensors()) {
    if (key == "param.1.master") {
      EXPECT_EQ(t.to_vector(), (std::vector<float>{4.0f, 5.0f}));
    } else if (key.rfind("param.1.", 0) == 0) {
      EXPECT_EQ(t.to_vector(), (std::vector<float>{0.0f, 0.0f})) << key;
    }
  }
  const auto scalars = opt.state_scalars();
  EXPECT_EQ(scalars[2], (std::pair<std::string, double>{"param.0.step", 1.0}));
  EXPECT_EQ(scalars[3], (std::pair<std::string, double>{"param.1.step", 0.0}));
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  opt.step();  // nothing has a gradient: no update is counted
  EXPECT_EQ(opt.steps(), 1);
}

}  // namespace
}  // namespace mixprec::optim
