// BatchNorm2d / BatchNorm1d / LayerNorm modules: registered names, train vs eval behaviour, and
// running statistics that stay f32 under every precision policy.
#include <gtest/gtest.h>

#include <cmath>

#include "mixprec/mixprec.h"
#include "mixprec/nn/norm_layers.h"

namespace mixprec::nn {
namespace {

/// Per-channel mean of y [N, C, S...] for channel c.
double channel_mean(const Tensor& y, std::int64_t c) {
  const std::vector<float> v = y.to_vector();
  const std::int64_t n = y.size(0), ch = y.size(1), s = y.numel() / (n * ch);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < s; ++j) sum += v[static_cast<std::size_t>((i * ch + c) * s + j)];
  return sum / static_cast<double>(n * s);
}

TEST(BatchNormLayerTest, RegistersParametersAndBuffers) {
  BatchNorm2d bn(4);
  EXPECT_EQ(bn.type_name(), "BatchNorm2d");
  const auto state = bn.state_dict();
  ASSERT_EQ(state.size(), 4u);
  for (const char* key : {"weight", "bias", "running_mean", "running_var"}) {
    ASSERT_EQ(state.count(key), 1u) << key;
    EXPECT_EQ(state.at(key).dtype(), DType::f32) << key;
    EXPECT_EQ(state.at(key).shape(), Shape{4}) << key;
  }
  EXPECT_EQ(bn.named_parameters().size(), 2u);  // running stats are buffers, not trained
  EXPECT_EQ(bn.named_buffers().size(), 2u);
  EXPECT_EQ(state.at("weight").to_vector(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(state.at("bias").to_vector(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(state.at("running_mean").to_vector(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(state.at("running_var").to_vector(), std::vector<float>(4, 1.0f));
  EXPECT_TRUE(bn.weight().requires_grad());
  EXPECT_FALSE(bn.running_mean().requires_grad());
  EXPECT_EQ(BatchNorm1d(3).type_name(), "BatchNorm1d");
  EXPECT_THROW(BatchNorm2d(0), ValueError);
}

TEST(BatchNormLayerTest, TrainUsesBatchStatsEvalUsesRunningStats) {
  BatchNorm2d bn(2);
  const Tensor x = Tensor::randn({8, 2, 4, 4}, 1, DType::f32, 5.0f, 2.0f);
  const Tensor y_train = bn(x);
  EXPECT_NEAR(channel_mean(y_train, 0), 0.0, 1e-5);
  EXPECT_NEAR(channel_mean(y_train, 1), 0.0, 1e-5);
  const std::vector<float> rm = bn.running_mean().to_vector();
  EXPECT_NEAR(rm[0], 0.5, 0.1);  // 10% of the way to a batch mean near 5
  bn.eval();
  const Tensor y_eval = bn(x);
  // Eval normalises with running mean ~0.5 and var ~1.3: the output keeps most of the offset.
  EXPECT_GT(channel_mean(y_eval, 0), 3.0);
  EXPECT_EQ(bn.running_mean().to_vector(), rm);  // eval leaves the statistics alone
  EXPECT_THROW(bn(Tensor::randn({8, 3, 4, 4}, 1)), ShapeError);
  EXPECT_THROW(bn(Tensor::randn({8, 2, 4}, 1)), ShapeError);
}

TEST(BatchNormLayerTest, BatchNorm1dOnFeatures) {
  BatchNorm1d bn(3);
  Tensor x = Tensor::randn({16, 3}, 2, DType::f32, -1.0f, 4.0f);
  x.set_requires_grad(true);
  const Tensor y = bn(x);
  for (std::int64_t c = 0; c < 3; ++c) EXPECT_NEAR(channel_mean(y, c), 0.0, 1e-5);
  sum(y).backward();
  ASSERT_TRUE(bn.weight().grad().defined());
  ASSERT_TRUE(bn.bias().grad().defined());
  EXPECT_NEAR(bn.bias().grad().to_vector()[0], 16.0, 1e-4);  // d sum(y) / d bias = N
}

TEST(BatchNormLayerTest, LoadStateDictRestoresRunningStats) {
  BatchNorm2d a(2), b(2);
  a(Tensor::randn({4, 2, 3, 3}, 3, DType::f32, 1.0f, 2.0f));
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.running_mean().to_vector(), a.running_mean().to_vector());
  EXPECT_EQ(b.running_var().to_vector(), a.running_var().to_vector());
}

TEST(BatchNormLayerTest, RunningStatsStayF32UnderEveryPrecisionMode) {
  using amp::PrecisionMode;
  for (PrecisionMode mode : {PrecisionMode::fp32, PrecisionMode::bf16, PrecisionMode::fp16,
                             PrecisionMode::pure_bf16, PrecisionMode::pure_bf16_sr}) {
    for (bool keep_norm : {true, false}) {
      auto model = sequential({std::make_shared<BatchNorm2d>(3), std::make_shared<Flatten>(),
                               std::make_shared<BatchNorm1d>(12)});
      amp::apply_parameter_dtypes(*model, amp::PrecisionPolicy::for_mode(mode, keep_norm));
      const std::string what = std::string(amp::name(mode)) + (keep_norm ? " keep" : "");
      const auto bn2 = std::static_pointer_cast<BatchNorm2d>(model->children()[0].second);
      if ((mode == PrecisionMode::pure_bf16 || mode == PrecisionMode::pure_bf16_sr) && keep_norm) {
        EXPECT_EQ(bn2->weight().dtype(), DType::f32) << what;  // the type:BatchNorm2d override
      }
      const DType in = mode == PrecisionMode::fp32 ? DType::f32 : DType::bf16;
      const Tensor y = (*model)(Tensor::randn({4, 3, 2, 2}, 4, in));
      EXPECT_EQ(y.shape(), (Shape{4, 12})) << what;
      for (const auto& [key, t] : model->named_buffers()) {
        EXPECT_EQ(t.dtype(), DType::f32) << what << " " << key;
      }
      EXPECT_NE(bn2->running_mean().to_vector(), std::vector<float>(3, 0.0f)) << what;
    }
  }
}

TEST(LayerNormLayerTest, NormalisesLastDimension) {
  LayerNorm ln(8);
  EXPECT_EQ(ln.type_name(), "LayerNorm");
  const auto state = ln.state_dict();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state.count("weight"), 1u);
  EXPECT_EQ(state.count("bias"), 1u);
  const Tensor x = Tensor::randn({2, 3, 8}, 7, DType::f32, 3.0f, 2.0f);
  const std::vector<float> y = ln(x).to_vector();
  for (int r = 0; r < 6; ++r) {
    double mean = 0, sq = 0;
    for (int j = 0; j < 8; ++j) mean += y[r * 8 + j];
    mean /= 8;
    for (int j = 0; j < 8; ++j) sq += (y[r * 8 + j] - mean) * (y[r * 8 + j] - mean);
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(sq / 8, 1.0, 1e-3);
  }
  EXPECT_THROW(ln(Tensor::randn({2, 7}, 1)), ShapeError);
  // Under autocast (fp32_to_lower): computed in f32, stored in the region's dtype, whatever the
  // input's dtype.
  runtime::Autocast ac(true, DType::bf16);
  EXPECT_EQ(ln(x.to(DType::bf16)).dtype(), DType::bf16);
  EXPECT_EQ(ln(x).dtype(), DType::bf16);
}

/// Counts the leaf forwards it sees.
class CountingObserver : public ForwardObserver {
 public:
  Tensor on_leaf_forward(Module&, const Tensor&, const Tensor& out) override {
    ++calls;
    return out;
  }
  int calls = 0;
};

// add_then_forward fuses the residual add into the norm only where nothing watches or changes
// the module's call: with an observer installed the observer sees the call, and under an f32
// compute override inside a bf16 region the override is honoured (f32 output); the values are
// the add then the module's own call every time.
TEST(LayerNormLayerTest, AddThenForwardFusesOnlyPlainCalls) {
  LayerNorm ln(8);
  const Tensor x = Tensor::randn({2, 3, 8}, 9), d = Tensor::randn({2, 3, 8}, 10, DType::bf16);
  const Tensor want_sum = x + d;
  EXPECT_TRUE(ln.runs_plainly());
  ResidualNorm r = ln.add_then_forward(x, d);
  EXPECT_EQ(r.sum.to_vector(), want_sum.to_vector());
  EXPECT_EQ(r.normalized.to_vector(), ln(want_sum).to_vector());
  {
    CountingObserver observer;
    ForwardObserverScope scope(&observer);
    EXPECT_FALSE(ln.runs_plainly());
    r = ln.add_then_forward(x, d);
    EXPECT_EQ(observer.calls, 1);
    EXPECT_EQ(r.normalized.to_vector(), ln(want_sum).to_vector());
  }
  runtime::Autocast region(true, DType::bf16);
  EXPECT_EQ(ln.add_then_forward(x, d).normalized.dtype(), DType::bf16);
  ln.set_compute_dtype(DType::f32);
  EXPECT_FALSE(ln.runs_plainly());
  r = ln.add_then_forward(x, d);
  EXPECT_EQ(r.normalized.dtype(), DType::f32);
  EXPECT_EQ(r.normalized.to_vector(), ln(want_sum).to_vector());
}

}  // namespace
}  // namespace mixprec::nn
