// `mixprec inspect` with known answers: layers built to overflow fp16 or to have gradients that
// flush to zero, a hand-computed lost-update fraction, alignment warnings, each verdict of the
// rule on constructed statistics, the memory model against the tracker, the observer hook, and
// that inspecting does not change what training computes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/train/inspect.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/nn/layers.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/optim/adam.h"

namespace mixprec::train {
namespace {

using numerics::TensorStats;
using numerics::LostUpdates;

using numerics::Format;

// y = c * x: a parameter-free layer that shrinks everything upstream's gradients pass through.
class Scale : public nn::Module {
 public:
  explicit Scale(float c) : c_(c) {}
  Tensor forward(const Tensor& x) override { return x * c_; }
  std::string type_name() const override { return "Scale"; }

 private:
  float c_;
};

void fill(const Tensor& t, float value) {
  runtime::NoGradGuard no_grad;
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = value;
  t.bump_version();
}

// Batches of `batch` samples of `features` N(0, 1) values (times `magnitude`), labels i % classes.
std::function<InspectBatch(int)> random_batches(std::int64_t batch, std::int64_t features,
                                                float magnitude = 1.0f, std::int64_t classes = 4) {
  return [=](int step) {
    InspectBatch b;
    b.inputs = Tensor::randn({batch, features}, 100 + static_cast<std::uint64_t>(step), DType::f32,
                             0.0f, magnitude);
    for (std::int64_t i = 0; i < batch; ++i) b.targets.push_back(i % classes);
    return b;
  };
}

const LayerReport& layer(const InspectReport& r, const std::string& path) {
  for (const LayerReport& l : r.layers) {
    if (l.path == path) return l;
  }
  ADD_FAILURE() << "no layer '" << path << "'";
  static const LayerReport none;
  return none;
}

InspectConfig config(const char* precision, int steps) {
  InspectConfig c;
  c.precision = precision;
  c.steps = steps;
  return c;
}

TEST(Inspect, ActivationsOf1e5OverflowFp16ButNotBf16) {
  auto lin = std::make_shared<nn::Linear>(8, 8, true, 1);
  fill(lin->weight(), 0.125f);  // each output = 8 * 0.125 * 1e5 = 1e5
  fill(lin->bias(), 0.0f);
  auto model = nn::sequential({lin});
  auto batches = [](int) {
    InspectBatch b{Tensor::full({4, 8}, 1e5f), {0, 1, 2, 3}};
    return b;
  };
  const InspectReport r = inspect_training(*model, batches, config("bf16", 2));
  const LayerReport& l = layer(r, "0");
  EXPECT_GT(l.activation.amax, 65504.0);
  EXPECT_EQ(l.activation.overflow_fraction(Format::fp16), 1.0);
  EXPECT_EQ(l.activation.overflow_fraction(Format::bf16), 0.0);
  EXPECT_EQ(l.activation.overflow_fraction(Format::fp8_e5m2), 1.0);
  // Adam moves 0.125 by about 1e-3, far above bf16's half ulp there (2^-11): bf16 keeps them.
  EXPECT_EQ(l.lost_updates.bf16_fraction(), 0.0);
  EXPECT_EQ(l.verdict, Verdict::bf16_fine) << l.reason;
  EXPECT_NE(l.reason.find("overflow fp16"), std::string::npos) << l.reason;
}

TEST(Inspect, WeightGradientsNear1eMinus9FlushInFp16AndNeedLossScaling) {
  // The Scale layer multiplies the logits by 1e-8, so everything upstream gets gradients 1e-8
  // times smaller: the Linear's weight gradients come out around 1e-9.
  auto model = nn::sequential({std::make_shared<nn::Linear>(16, 16, true, 3), std::make_shared<Scale>(1e-8f)});
  const InspectReport r = inspect_training(*model, random_batches(8, 16), config("fp32", 2));
  const LayerReport& l = layer(r, "0");
  EXPECT_GT(l.weight_grad.amax, 1e-10);
  EXPECT_LT(l.weight_grad.amax, 1e-8);
  EXPECT_EQ(l.weight_grad.underflow_fraction(Format::fp16), 1.0);
  EXPECT_EQ(l.weight_grad.underflow_fraction(Format::bf16), 0.0);
  // The reference scale comes from the largest gradient (Scale's output gradient, below 1).
  EXPECT_GE(r.reference_scale_log2, 16);
  EXPECT_LE(l.fp16_grad_underflow_at_reference, 0.01);
  EXPECT_EQ(l.verdict, Verdict::needs_loss_scaling) << l.reason;
}

TEST(Inspect, Fp16RunReportsGradientsUnscaledAndAsScaled) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(16, 16, true, 3), std::make_shared<Scale>(1e-8f)});
  const InspectReport r = inspect_training(*model, random_batches(8, 16), config("fp16", 2));
  ASSERT_TRUE(r.loss_scaling);
  ASSERT_EQ(r.loss_scales.size(), 2u);
  EXPECT_EQ(r.loss_scales[0], 65536.0);
  EXPECT_EQ(r.loss_scales[1], 65536.0);
  const LayerReport& l = layer(r, "0");
  ASSERT_FALSE(l.output_grad_scaled.empty());
  ASSERT_FALSE(l.weight_grad_scaled.empty());
  // Every scale was 2^16 and the scaled gradients are f16 (the output) or f32 (the weights):
  // unscaled = scaled / 2^16 exactly.
  EXPECT_EQ(l.output_grad_scaled.amax, l.output_grad.amax * 65536.0);
  EXPECT_EQ(l.weight_grad_scaled.amax, l.weight_grad.amax * 65536.0);
  EXPECT_EQ(l.weight_grad.underflow_fraction(Format::fp16), 1.0);
  EXPECT_EQ(l.weight_grad_scaled.underflow_fraction(Format::fp16), 0.0);
}

TEST(Inspect, LostUpdateFractionMatchesTheHandComputedValue) {
  // half ulp: fp16 2^-11 = 4.9e-4 at w = 1, 2^-10 at 2, 0.25 at 1000, 2^-25 for subnormal w;
  // bf16 2^-8 = 3.9e-3 at 1, 2^-7 at 2, 2 at 1000, 2^-28 at 1e-6 (bf16 keeps it normal).
  const std::vector<float> w = {1, 1, 0, 1000, 1, -2, 1e-6f, 1};
  const std::vector<double> dw = {1e-4,   // lost in fp16 and bf16
                                  1e-3,   // fp16 keeps it, bf16 loses it
                                  5,      // w = 0: not counted
                                  0.1,    // lost in both
                                  0,      // no update: not counted
                                  -0.01,  // kept by both
                                  1e-8,   // fp16 loses it (2^-25 = 3e-8), bf16 keeps it
                                  2e-3};  // fp16 keeps it, bf16 loses it
  LostUpdates lost;
  lost.add(w, dw);
  EXPECT_EQ(lost.considered, 6);
  EXPECT_EQ(lost.lost_fp16, 3);
  EXPECT_EQ(lost.lost_bf16, 4);
  EXPECT_DOUBLE_EQ(lost.fp16_fraction(), 0.5);
  EXPECT_DOUBLE_EQ(lost.bf16_fraction(), 4.0 / 6.0);
  EXPECT_THROW(lost.add(w, std::vector<double>{1.0}), ValueError);
}

TEST(Inspect, AlignmentWarningsNameThe100WideLayerOnly) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(128, 100, true, 1), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(100, 128, true, 2)});
  const std::vector<AlignmentWarning> w = alignment_warnings(*model, 64, false);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].layer, "0");
  EXPECT_EQ(w[0].dimension, "out_features");
  EXPECT_EQ(w[0].size, 100);
  EXPECT_EQ(w[1].layer, "2");
  EXPECT_EQ(w[1].dimension, "in_features");
  for (const AlignmentWarning& a : w) {
    EXPECT_NE(a.message.find("= 100 "), std::string::npos) << a.message;
    EXPECT_EQ(a.message.find("128"), std::string::npos) << a.message;
  }
  // A 128-wide-only model, and the batch.
  auto aligned = nn::sequential({std::make_shared<nn::Linear>(128, 128, true, 1)});
  EXPECT_TRUE(alignment_warnings(*aligned, 64, true).empty());
  const std::vector<AlignmentWarning> batch = alignment_warnings(*aligned, 100, false);
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].dimension, "batch");
  // 120 is a multiple of 8, not of 16: a warning only for bf16.
  auto wide120 = nn::sequential({std::make_shared<nn::Linear>(128, 120, true, 1)});
  EXPECT_TRUE(alignment_warnings(*wide120, 64, false).empty());
  const std::vector<AlignmentWarning> bf = alignment_warnings(*wide120, 64, true);
  ASSERT_EQ(bf.size(), 1u);
  EXPECT_EQ(bf[0].multiple, 16);
}

// Statistics of a stream holding n copies of v.
TensorStats filled(double v, int n = 100) {
  TensorStats s;
  for (int i = 0; i < n; ++i) s.add(v);
  return s;
}

TEST(Verdict, EachOfTheFourVerdictsOnConstructedStatistics) {
  LayerReport safe;
  safe.activation = filled(3.0);
  safe.output_grad = filled(1e-3);
  safe.weight_grad = filled(1e-4);
  EXPECT_EQ(decide_verdict(safe, 10).verdict, Verdict::safe_fp16);

  LayerReport scaling = safe;
  scaling.weight_grad = filled(1e-9);  // flushes in fp16; 1e-9 * 2^16 = 6.6e-5 fits
  const VerdictResult s = decide_verdict(scaling, 16);
  EXPECT_EQ(s.verdict, Verdict::needs_loss_scaling);
  EXPECT_NE(s.reason.find("parameter gradients"), std::string::npos) << s.reason;
  // ... but at a reference scale too small to lift them, fp16 cannot hold the layer.
  EXPECT_EQ(decide_verdict(scaling, 2).verdict, Verdict::bf16_fine);

  LayerReport bf16 = safe;
  bf16.activation = filled(1e5);
  EXPECT_EQ(decide_verdict(bf16, 10).verdict, Verdict::bf16_fine);

  LayerReport keep = bf16;  // activations overflow fp16 and bf16 weights lose the updates
  const std::vector<float> w(10, 1.0f);
  const std::vector<double> dw(10, 1e-4);
  keep.lost_updates.add(w, dw);
  const VerdictResult k = decide_verdict(keep, 10);
  EXPECT_EQ(k.verdict, Verdict::keep_fp32);
  EXPECT_NE(k.reason.find("lose 100% of the updates"), std::string::npos) << k.reason;

  LayerReport everything = safe;  // beyond bf16 (an f32 Inf): no 16-bit format holds it
  everything.output_grad.add(std::numeric_limits<double>::infinity());
  EXPECT_EQ(decide_verdict(everything, 10).verdict, Verdict::keep_fp32);

  // Tolerances: 1 value in 1000 flushing is within the default 1%.
  LayerReport tolerated = safe;
  tolerated.weight_grad = filled(1e-4, 999);
  tolerated.weight_grad.add(1e-9);
  EXPECT_EQ(decide_verdict(tolerated, 0).verdict, Verdict::safe_fp16);
  EXPECT_EQ(decide_verdict(tolerated, 0, {.underflow = 0}).verdict, Verdict::bf16_fine);
}

TEST(Verdict, NamesAndReferenceScale) {
  EXPECT_STREQ(name(Verdict::safe_fp16), "safe in fp16");
  EXPECT_STREQ(name(Verdict::needs_loss_scaling), "needs loss scaling");
  EXPECT_STREQ(name(Verdict::bf16_fine), "bf16 fine");
  EXPECT_STREQ(name(Verdict::keep_fp32), "keep in fp32");
  EXPECT_EQ(reference_scale_log2(1.0), 15);          // 2^15 = 32768 <= 65504 < 2^16
  EXPECT_EQ(reference_scale_log2(65504.0), 0);
  EXPECT_EQ(reference_scale_log2(65505.0), -1);
  EXPECT_EQ(reference_scale_log2(1e-9), 45);         // 1e-9 * 2^45 = 35184 <= 65504
  EXPECT_EQ(reference_scale_log2(0.0), 0);
}

TEST(Inspect, MeasuredBytesPerParameterMatchTheMemoryModel) {
  const std::vector<MemoryModelRow> rows = memory_model();
  ASSERT_EQ(rows.size(), 4u);
  const std::pair<const char*, double> modes[] = {
      {"fp32", rows[0].persistent}, {"bf16", rows[1].persistent}, {"fp16", rows[1].persistent},
      {"pure-bf16", rows[2].persistent}, {"pure-bf16-sr", rows[3].persistent}};
  for (const auto& [mode, expected] : modes) {
    auto model = nn::sequential({std::make_shared<nn::Linear>(64, 32, true, 1), std::make_shared<nn::ReLU>(),
                                 std::make_shared<nn::Linear>(32, 4, true, 2)});
    const InspectReport r = inspect_training(*model, random_batches(16, 64), config(mode, 1));
    EXPECT_DOUBLE_EQ(r.measured.persistent_per_parameter, expected) << mode;
    EXPECT_GT(r.measured.activation_peak, 0u) << mode;
  }
}

TEST(Inspect, ObservingDoesNotChangeWhatTrainingComputes) {
  // The same model, data and optimizer by hand, without the inspector: identical losses.
  auto make = [] {
    return nn::sequential({std::make_shared<nn::Linear>(32, 24, true, 5), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Linear>(24, 4, true, 6)});
  };
  const auto batches = random_batches(16, 32);
  auto inspected = make();
  const InspectReport r = inspect_training(*inspected, batches, config("bf16", 3));
  auto plain = make();
  optim::Adam opt(plain->parameters(), {.lr = 1e-3f});
  double first_layer_grad_amax = 0;  // Adam would hide a uniformly scaled gradient: check it too
  for (int step = 0; step < 3; ++step) {
    const InspectBatch b = batches(step);
    Tensor loss;
    {
      runtime::Autocast region(true, DType::bf16);
      loss = cross_entropy((*plain)(b.inputs), b.targets);
    }
    EXPECT_EQ(loss.item(), r.losses[static_cast<std::size_t>(step)]) << "step " << step;
    loss.backward();
    for (std::size_t i = 0; i < 2; ++i) {  // layer "0": weight and bias
      for (float g : opt.params()[i].grad().to_vector()) {
        first_layer_grad_amax = std::max(first_layer_grad_amax, std::fabs(static_cast<double>(g)));
      }
    }
    opt.step();
    opt.zero_grad();
  }
  EXPECT_EQ(r.layers[0].weight_grad.amax, first_layer_grad_amax);
  // Leaf modules in the order they ran, with their shapes.
  ASSERT_EQ(r.layers.size(), 3u);
  EXPECT_EQ(r.layers[0].path, "0");
  EXPECT_EQ(r.layers[1].type, "ReLU");
  EXPECT_EQ(r.layers[2].output_shape, (Shape{16, 4}));
  EXPECT_EQ(r.layers[0].parameters, 32 * 24 + 24);
  EXPECT_TRUE(r.layers[1].weight_grad.empty());
  EXPECT_EQ(r.layers[0].activation.count, 3 * 16 * 24);
  EXPECT_EQ(r.layers[0].output_grad.count, 3 * 16 * 24);
  EXPECT_EQ(r.layers[0].weight_update.count, 3 * (32 * 24 + 24));
}

class CountingObserver : public nn::ForwardObserver {
 public:
  std::vector<std::string> seen;
  Tensor on_leaf_forward(nn::Module& m, const Tensor&, const Tensor& out) override {
    seen.push_back(m.path() + ":" + m.type_name());
    return out;
  }
};

TEST(ForwardObserver, SeesLeafModulesOnlyAndScopesNest) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(4, 4, true, 1), std::make_shared<nn::ReLU>()});
  const Tensor x = Tensor::randn({2, 4}, 1);
  CountingObserver outer, inner;
  {
    nn::ForwardObserverScope a(&outer);
    (*model)(x);
    {
      nn::ForwardObserverScope b(&inner);
      (*model)(x);
    }
    (*model)(x);
  }
  (*model)(x);  // none installed
  EXPECT_EQ(outer.seen, (std::vector<std::string>{"0:Linear", "1:ReLU", "0:Linear", "1:ReLU"}));
  EXPECT_EQ(inner.seen, (std::vector<std::string>{"0:Linear", "1:ReLU"}));
}

TEST(Inspect, ReportPrintsAsJsonTextAndSvg) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(16, 12, true, 1), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(12, 4, true, 2)});
  const InspectReport r = inspect_training(*model, random_batches(8, 16), config("fp16", 2));
  const nlohmann::json j = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(j["schema"], "mixprec.inspect.v1");
  EXPECT_EQ(j["precision"], "fp16");
  EXPECT_EQ(j["batch_size"], 8);
  ASSERT_EQ(j["layers"].size(), 3u);
  for (std::size_t i = 0; i < r.layers.size(); ++i) {
    const nlohmann::json& l = j["layers"][i];
    EXPECT_EQ(l["path"], r.layers[i].path);
    EXPECT_EQ(l["verdict"], name(r.layers[i].verdict));
    EXPECT_EQ(l["activation"]["amax"].get<double>(), r.layers[i].activation.amax);
    EXPECT_EQ(l["activation"]["fp16"]["overflow"].get<double>(),
              r.layers[i].activation.overflow_fraction(Format::fp16));
    EXPECT_FALSE(l["output_grad_scaled"].is_null());  // fp16: a loss scale was in use
  }
  EXPECT_TRUE(j["layers"][1]["weight_grad"].is_null());  // ReLU has no parameters
  EXPECT_EQ(j["memory"]["model"].size(), 4u);
  EXPECT_EQ(j["alignment"].size(), r.alignment.size());

  const std::string text = to_text(r);
  for (const LayerReport& l : r.layers) EXPECT_NE(text.find(l.path + " "), std::string::npos);
  EXPECT_NE(text.find("verdict"), std::string::npos);

  const std::string svg = render_inspect_svg(r);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("fp16 max"), std::string::npos);
  for (const LayerReport& l : r.layers) EXPECT_NE(svg.find(name(l.verdict)), std::string::npos);
  EXPECT_EQ(render_inspect_svg(r), svg);  // deterministic

  const std::string dir = ::testing::TempDir() + "inspect_svg_test";
  io::make_directories(dir);
  write_inspect_svg(r, dir + "/layers.svg");
  EXPECT_EQ(io::read_file(dir + "/layers.svg"), svg);
  try {
    write_inspect_svg(r, dir + "/no-such-dir/layers.svg");
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-dir/layers.svg"), std::string::npos) << e.what();
  }
}

TEST(Inspect, BadInputIsRefusedWithAReason) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(4, 4, true, 1)});
  EXPECT_THROW(inspect_training(*model, random_batches(2, 4), config("fp32", 0)), ValueError);
  EXPECT_THROW(inspect_training(*model, random_batches(2, 4), config("fp8", 1)), ValueError);
  auto mismatched = [](int) { return InspectBatch{Tensor::randn({3, 4}, 1), {0, 1}}; };
  EXPECT_THROW(inspect_training(*model, mismatched, config("fp32", 1)), ValueError);
  InspectOptions o;
  o.model = "vgg";
  EXPECT_THROW(inspect_builtin(o), ValueError);
  o.model = "mlp";
  o.batch_size = 0;
  EXPECT_THROW(inspect_builtin(o), ValueError);
}

TEST(Inspect, BuiltinMlpOnFashionMnist) {
  InspectOptions o;
  o.model = "mlp";
  o.precision = "bf16";
  o.steps = 2;
  o.batch_size = 32;
  const InspectReport r = inspect_builtin(o);
  EXPECT_EQ(r.model, "mlp");
  EXPECT_EQ(r.data, "fashion-mnist");
  ASSERT_EQ(r.layers.size(), 5u);  // Linear, ReLU, Linear, ReLU, Linear
  EXPECT_EQ(r.layers[0].path, "layers.0");
  EXPECT_EQ(r.losses.size(), 2u);
  EXPECT_TRUE(std::isfinite(r.losses[1]));
  // The 10-wide classifier is not a multiple of 8 (or 16).
  bool named = false;
  for (const AlignmentWarning& w : r.alignment) named |= w.layer == "layers.4" && w.size == 10;
  EXPECT_TRUE(named);
}

// An fp8 inspect run reports every fp8 layer (the default policy: the middle Linear of three)
// with its three roles, the amax and scale after the last step and the counted fractions; the
// JSON and the text carry them.
TEST(Inspect, Fp8RunReportsAmaxScaleAndFractionsPerLayerAndRole) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(16, 32, true, 1), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(32, 32, true, 2), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(32, 4, true, 3)});
  const InspectReport r = inspect_training(*model, random_batches(8, 16, 1000.0f), config("fp8-delayed", 2));
  ASSERT_EQ(r.fp8.size(), 1u);
  EXPECT_EQ(r.fp8[0].path, "2");
  ASSERT_EQ(r.fp8[0].roles.size(), 3u);
  for (const nn::Fp8RoleReport& role : r.fp8[0].roles) {
    SCOPED_TRACE(role.role);
    EXPECT_TRUE(role.observed);
    EXPECT_GT(role.amax, 0.0);
    EXPECT_GE(role.history_amax, role.amax);
    EXPECT_GT(role.scale, 0.0);
    EXPECT_GE(role.saturated, 0.0);
    EXPECT_LE(role.flushed, 1.0);
  }
  // Inputs ~1000 are beyond E4M3's 448 at the first step's scale 1.
  EXPECT_GT(r.fp8[0].roles[0].saturated, 0.0);
  const nlohmann::json j = nlohmann::json::parse(to_json(r));
  ASSERT_EQ(j.at("fp8").size(), 3u);
  EXPECT_EQ(j.at("fp8")[0].at("layer"), "2");
  EXPECT_EQ(j.at("fp8")[2].at("role"), "grad");
  EXPECT_TRUE(j.at("fp8")[0].at("saturated").is_number());
  EXPECT_NE(to_text(r).find("fp8 layers"), std::string::npos);
  EXPECT_TRUE(inspect_training(*model, random_batches(8, 16), config("bf16", 1)).fp8.empty());
}

}  // namespace
}  // namespace mixprec::train
