// The seeds' MLP benchmark: Linear(1024, 4096) - ReLU - Linear(4096, 4096) - ReLU -
// Linear(4096, 10), batch 256, Adam, trained on a synthetic task that can be learnt: the label
// of an input is the argmax of a fixed random linear "teacher". Prints the loss falling and the
// median step time, in any precision mode (fp32, bf16, fp16, pure-bf16, pure-bf16-sr, auto).
//
//   ./build/examples/seed_mlp [steps=40] [batch=256] [precision=fp32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <mixprec/mixprec.h>
#include <mixprec/amp/grad_scaler.h>
#include <mixprec/optim/adam.h>

using namespace mixprec;

namespace {

struct Batch {
  Tensor x;
  std::vector<std::int64_t> y;
};

// A pool of batches labelled by the teacher; cycling through it keeps data generation out of
// the timed step.
std::vector<Batch> make_batches(int count, std::int64_t batch, nn::Linear& teacher) {
  std::vector<Batch> out;
  runtime::NoGradGuard no_grad;
  for (int b = 0; b < count; ++b) {
    Batch item{Tensor::randn({batch, 1024}, 1000 + static_cast<std::uint64_t>(b)), {}};
    const std::vector<float> logits = teacher.forward(item.x).to_vector();
    for (std::int64_t r = 0; r < batch; ++r) {
      const auto row = logits.begin() + r * 10;
      item.y.push_back(std::max_element(row, row + 10) - row);
    }
    out.push_back(std::move(item));
  }
  return out;
}

int run(int steps, std::int64_t batch, amp::PrecisionMode mode) {
  if (mode == amp::PrecisionMode::automatic) {
    const amp::PrecisionChoice choice = amp::choose_precision(cpu_features());
    std::printf("auto: %s\n", choice.reason.c_str());
    mode = choice.mode;
  }
  const amp::PrecisionPolicy policy = amp::PrecisionPolicy::for_mode(mode);
  auto model = nn::sequential({std::make_shared<nn::Linear>(1024, 4096, true, 1),
                               std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(4096, 4096, true, 2),
                               std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(4096, 10, true, 3)});
  nn::Linear teacher(1024, 10, false, 99);
  const std::vector<Batch> batches = make_batches(8, batch, teacher);
  amp::apply_parameter_dtypes(*model, policy);  // pure modes store parameters in bf16
  optim::OptimizerOptions masters;
  if (mode == amp::PrecisionMode::pure_bf16_sr) {
    masters.master_weights = optim::MasterWeights::none_stochastic_rounding;
  }
  optim::Adam opt(model->parameters(), {.lr = 1e-4f}, masters);
  amp::GradScaler scaler({.enabled = mode == amp::PrecisionMode::fp16});
  const bool autocast = policy.dtypes.compute != DType::f32;
  std::fputs(amp::precision_warnings(mode, scaler.is_enabled(), cpu_features()).c_str(), stdout);
  std::printf("seed_mlp: %lld parameters, batch %lld, %s (%s), Adam; cpu: %s\n",
              static_cast<long long>(model->parameter_count()), static_cast<long long>(batch),
              amp::name(mode), policy.to_string().c_str(), cpu_features().to_string().c_str());

  std::vector<double> step_ms;
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    const Batch& b = batches[static_cast<std::size_t>(step) % batches.size()];
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss;
    {
      amp::Autocast region(autocast, autocast ? policy.dtypes.compute : DType::bf16);
      loss = cross_entropy(model->forward(b.x), b.y);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);  // unscales first; skips the update if a gradient overflowed
    scaler.update();
    opt.zero_grad();
    const auto t1 = std::chrono::steady_clock::now();
    step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    losses.push_back(loss.item());
    if (step % 5 == 0 || step == steps - 1) {
      std::printf("step %3d  loss %.4f  %.1f ms\n", step, losses.back(), step_ms.back());
    }
  }
  // The first steps warm caches and oneDNN's primitive cache: report the median of the rest.
  std::vector<double> steady(step_ms.begin() + std::min<std::ptrdiff_t>(3, steps - 1), step_ms.end());
  std::sort(steady.begin(), steady.end());
  const double median = steady[steady.size() / 2];
  const int window = std::max(1, steps / 5);
  double first = 0, last = 0;
  for (int i = 0; i < window; ++i) {
    first += losses[static_cast<std::size_t>(i)];
    last += losses[static_cast<std::size_t>(steps - 1 - i)];
  }
  first /= window;
  last /= window;
  const MemoryStats mem = memory_stats();
  std::printf("median step %.1f ms (min %.1f, max %.1f) over %zu steps; loss %.4f -> %.4f; peak %.1f MiB; "
              "skipped steps %lld\n",
              median, steady.front(), steady.back(), steady.size(), first, last,
              static_cast<double>(mem.total_peak) / (1 << 20),
              static_cast<long long>(scaler.stats().skipped_steps));
  if (!(last < first)) {
    std::fprintf(stderr, "seed_mlp: the loss did not fall (%.4f -> %.4f)\n", first, last);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int steps = argc > 1 ? std::stoi(argv[1]) : 40;
    const std::int64_t batch = argc > 2 ? std::stoll(argv[2]) : 256;
    const amp::PrecisionMode mode = amp::parse_precision_mode(argc > 3 ? argv[3] : "fp32");
    if (steps < 2 || batch < 1) {
      std::fprintf(stderr, "usage: seed_mlp [steps >= 2] [batch >= 1] [precision]\n");
      return 2;
    }
    return run(steps, batch, mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seed_mlp: %s\n", e.what());
    return 1;
  }
}
