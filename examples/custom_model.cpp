// A model of your own, trained by mixprec's Trainer through the public C++ API: a classifier
// with a custom op (Swish, defined by its forward and backward with runtime::CustomFunction),
// on Fashion-MNIST through a DataLoader, in bf16 autocast with fp32 master weights, with
// checkpoints, a JSONL log and --max-steps exactly as `mixprec train` has them.
//
//   ./build/examples/custom_model [max_steps]       (default 200)
#include <cstdio>
#include <cstdlib>

#include <mixprec/mixprec.h>

using namespace mixprec;

// swish(x) = x sigmoid(x); its derivative s + x s (1 - s) with s = sigmoid(x).
const runtime::CustomFunction kSwish{
    "swish",
    [](runtime::FunctionContext& ctx, const std::vector<Tensor>& in) {
      ctx.save_for_backward({in[0]});
      return in[0] * sigmoid(in[0]);
    },
    [](runtime::FunctionContext& ctx, const Tensor& dy) -> std::vector<Tensor> {
      const Tensor& x = ctx.saved_tensors()[0];
      const Tensor s = sigmoid(x);
      return {dy * (s + x * (s - s * s))};
    },
    DType::f32};  // custom_fwd(cast_inputs=f32): the op runs in f32 inside bf16 regions

class SwishMlp : public nn::Module {
 public:
  explicit SwishMlp(std::uint64_t seed) {
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(784, 256, true, seed));
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(256, 10, true, seed + 1));
  }
  Tensor forward(const Tensor& x) override {
    return (*fc2_)(runtime::apply(kSwish, {(*fc1_)(x)}));
  }
  std::string type_name() const override { return "SwishMlp"; }

 private:
  std::shared_ptr<nn::Linear> fc1_, fc2_;
};

int main(int argc, char** argv) {
  const std::string dir = data::kFashionMnistDefaultDir;
  data::DataLoaderOptions train_opts{.batch_size = 128, .seed = 1};
  data::DataLoaderOptions eval_opts{.batch_size = 1000, .shuffle = false, .prefetch = false};
  auto train_data = std::make_shared<data::DataLoader>(data::load_fashion_mnist(dir, true), train_opts);
  auto test_data = std::make_shared<data::DataLoader>(data::load_fashion_mnist(dir, false), eval_opts);

  train::TrainConfig config;
  config.model = "swish-mlp";  // a label for logs and checkpoints
  config.precision = "bf16";
  config.optimizer = "adamw";
  config.lr = 2e-3f;
  config.max_steps = argc > 1 ? std::atoll(argv[1]) : 200;
  config.log_path = "custom_model.jsonl";
  train::Trainer trainer(config, std::make_shared<SwishMlp>(7), train_data, test_data,
                         std::make_shared<train::ClassificationTask>(10));
  trainer.on_epoch = [](const train::EpochMetrics& m) {
    std::printf("epoch %d: %lld steps, train loss %.4f, test accuracy %.4f, macro-F1 %.4f\n", m.epoch,
                static_cast<long long>(m.optimizer_steps), m.train_loss, m.test_accuracy, m.macro_f1);
  };
  trainer.run();
  return 0;
}
