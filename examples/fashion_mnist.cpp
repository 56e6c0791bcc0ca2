// Trains an MLP (784-256-128-10, ReLU) on Fashion-MNIST with Adam in any precision mode, using
// the seeds' training loop (see seed_mlp.cpp): forward and loss under autocast, a GradScaler for
// fp16, then step and update. After each epoch prints the mean training loss, the test accuracy
// (evaluated under the same autocast policy, without autograd), throughput, peak memory and the
// number of steps the GradScaler skipped.
//
//   ./build/examples/fashion_mnist [--epochs N=1] [--precision fp32|bf16|fp16|pure-bf16|pure-bf16-sr|auto]
//       [--batch-size B=128] [--lr X=1e-3] [--data-dir DIR] [--limit-train N]
//
// The data comes from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <mixprec/amp/grad_scaler.h>
#include <mixprec/data/idx.h>
#include <mixprec/mixprec.h>
#include <mixprec/optim/adam.h>

using namespace mixprec;

namespace {

constexpr std::int64_t kFeatures = 28 * 28;
constexpr std::int64_t kEvalBatch = 1000;
constexpr std::uint64_t kShuffleSeed = 20240601;

struct Options {
  int epochs = 1;
  amp::PrecisionMode mode = amp::PrecisionMode::fp32;
  std::int64_t batch = 128;
  float lr = 1e-3f;
  std::string data_dir = data::kFashionMnistDefaultDir;
  std::int64_t limit_train = -1;
};

const char* const kUsage =
    "usage: fashion_mnist [--epochs N=1] [--precision fp32|bf16|fp16|pure-bf16|pure-bf16-sr|auto]\n"
    "                     [--batch-size B=128] [--lr X=1e-3] [--data-dir DIR] [--limit-train N]\n"
    "Trains a 784-256-128-10 MLP on Fashion-MNIST with Adam and prints, per epoch, the training\n"
    "loss, test accuracy, samples/s, peak memory and skipped (overflowing) steps.\n"
    "DIR defaults to /usr/share/datasets/fashion-mnist (sudo apt-get install dataset-fashion-mnist).\n";

// A command-line mistake: main prints the message and the usage and exits with status 2.
struct UsageError {
  std::string message;
};

std::int64_t parse_int(std::string_view flag, std::string_view text, std::int64_t min) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min) {
    throw UsageError{std::string(flag) + " needs an integer >= " + std::to_string(min) + ", got '" +
                     std::string(text) + "'"};
  }
  return value;
}

float parse_positive_float(std::string_view flag, const std::string& text) {
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value <= 0) {
    throw UsageError{std::string(flag) + " needs a positive number, got '" + text + "'"};
  }
  return value;
}

// Accepts "--flag value" and "--flag=value". Returns false when --help was asked for.
bool parse_args(int argc, char** argv, Options& opt) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return false;
    std::string value;
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (arg.starts_with("--")) {
      if (i + 1 >= argc) throw UsageError{arg + " needs a value"};
      value = argv[++i];
    }
    if (arg == "--epochs") {
      opt.epochs = static_cast<int>(parse_int(arg, value, 1));
    } else if (arg == "--precision") {
      try {
        opt.mode = amp::parse_precision_mode(value);
      } catch (const ValueError& e) {
        throw UsageError{e.what()};
      }
    } else if (arg == "--batch-size") {
      opt.batch = parse_int(arg, value, 1);
    } else if (arg == "--lr") {
      opt.lr = parse_positive_float(arg, value);
    } else if (arg == "--data-dir") {
      if (value.empty()) throw UsageError{"--data-dir needs a directory"};
      opt.data_dir = value;
    } else if (arg == "--limit-train") {
      opt.limit_train = parse_int(arg, value, 1);
    } else {
      throw UsageError{"unknown argument '" + std::string(argv[i]) + "'"};
    }
  }
  if (opt.epochs > 1000) throw UsageError{"--epochs must be at most 1000"};
  return true;
}

// Rows order[begin, end) of images gathered into a new [end - begin, 784] f32 tensor.
Tensor gather_rows(const Tensor& images, const std::vector<std::int64_t>& order, std::size_t begin,
                   std::size_t end) {
  Tensor x = Tensor::empty({static_cast<std::int64_t>(end - begin), kFeatures});
  float* dst = x.data<float>();
  const float* src = images.data<float>();
  for (std::size_t r = begin; r < end; ++r) {
    std::memcpy(dst + (r - begin) * kFeatures, src + order[r] * kFeatures, kFeatures * sizeof(float));
  }
  return x;
}

std::int64_t argmax_row(const std::vector<float>& logits, std::int64_t row, std::int64_t classes) {
  const auto first = logits.begin() + row * classes;
  return std::max_element(first, first + classes) - first;
}

// Fraction of test samples classified correctly, under the training run's autocast policy.
double evaluate(nn::Module& model, const data::Dataset& test, bool autocast, DType compute) {
  runtime::NoGradGuard no_grad;
  amp::Autocast region(autocast, autocast ? compute : DType::bf16);
  const auto n = static_cast<std::int64_t>(test.labels.size());
  std::int64_t correct = 0;
  for (std::int64_t begin = 0; begin < n; begin += kEvalBatch) {
    const std::int64_t end = std::min(n, begin + kEvalBatch);
    const std::vector<float> logits = model.forward(test.images.slice(0, begin, end)).to_vector();
    for (std::int64_t r = 0; r < end - begin; ++r) {
      correct += argmax_row(logits, r, 10) == test.labels[static_cast<std::size_t>(begin + r)];
    }
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const Options& opt) {
  amp::PrecisionMode mode = opt.mode;
  if (mode == amp::PrecisionMode::automatic) {
    const amp::PrecisionChoice choice = amp::choose_precision(cpu_features());
    std::printf("auto: %s\n", choice.reason.c_str());
    mode = choice.mode;
  }
  const auto t_load = std::chrono::steady_clock::now();
  const data::Dataset train = data::load_fashion_mnist(opt.data_dir, /*train=*/true, opt.limit_train);
  const data::Dataset test = data::load_fashion_mnist(opt.data_dir, /*train=*/false);
  const double load_s = seconds_since(t_load);
  const double data_mib = static_cast<double>(train.images.nbytes() + test.images.nbytes()) / (1 << 20);

  const amp::PrecisionPolicy policy = amp::PrecisionPolicy::for_mode(mode);
  auto model = nn::sequential({std::make_shared<nn::Linear>(kFeatures, 256, true, 1),
                               std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(256, 128, true, 2),
                               std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(128, 10, true, 3)});
  amp::apply_parameter_dtypes(*model, policy);  // pure modes store parameters in bf16
  optim::OptimizerOptions masters;
  if (mode == amp::PrecisionMode::pure_bf16_sr) {
    masters.master_weights = optim::MasterWeights::none_stochastic_rounding;
  }
  optim::Adam adam(model->parameters(), {.lr = opt.lr}, masters);
  amp::GradScaler scaler({.enabled = mode == amp::PrecisionMode::fp16});
  const bool autocast = policy.dtypes.compute != DType::f32;
  std::fputs(amp::precision_warnings(mode, scaler.is_enabled(), cpu_features()).c_str(), stdout);
  std::printf("fashion_mnist: %zu train / %zu test samples (loaded in %.2f s), MLP 784-256-128-10 with "
              "%lld parameters, batch %lld, Adam lr %g, %s (%s); cpu: %s\n",
              train.labels.size(), test.labels.size(), load_s,
              static_cast<long long>(model->parameter_count()), static_cast<long long>(opt.batch),
              static_cast<double>(opt.lr), amp::name(mode), policy.to_string().c_str(),
              cpu_features().to_string().c_str());

  std::vector<std::int64_t> order(train.labels.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(kShuffleSeed);
  const auto batch = static_cast<std::size_t>(opt.batch);
  std::vector<std::int64_t> y;
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    const auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    std::int64_t steps = 0;
    for (std::size_t begin = 0; begin < order.size(); begin += batch) {
      const std::size_t end = std::min(order.size(), begin + batch);
      const Tensor x = gather_rows(train.images, order, begin, end);
      y.clear();
      for (std::size_t r = begin; r < end; ++r) y.push_back(train.labels[static_cast<std::size_t>(order[r])]);
      Tensor loss;
      {
        amp::Autocast region(autocast, autocast ? policy.dtypes.compute : DType::bf16);
        loss = cross_entropy(model->forward(x), y);
      }
      scaler.scale(loss).backward();
      scaler.step(adam);  // unscales first; skips the update if a gradient overflowed
      scaler.update();
      adam.zero_grad();
      loss_sum += loss.item();
      ++steps;
    }
    const double train_s = seconds_since(t0);
    const auto t_eval = std::chrono::steady_clock::now();
    const double accuracy = evaluate(*model, test, autocast, policy.dtypes.compute);
    const double eval_s = seconds_since(t_eval);
    const MemoryStats mem = memory_stats();
    std::printf("epoch %d/%d  train loss %.4f  test accuracy %.4f  %.0f samples/s (train %.2f s, eval %.2f s)  "
                "peak memory %.1f MiB (of which data %.1f MiB)  skipped steps %lld\n",
                epoch, opt.epochs, loss_sum / static_cast<double>(steps), accuracy,
                static_cast<double>(order.size()) / train_s, train_s, eval_s,
                static_cast<double>(mem.total_peak) / (1 << 20), data_mib,
                static_cast<long long>(scaler.stats().skipped_steps));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  try {
    if (!parse_args(argc, argv, opt)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n%s", e.message.c_str(), kUsage);
    return 2;
  }
  try {
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
}
