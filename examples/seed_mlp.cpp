// The seeds' MLP benchmark: Linear(1024, 4096) - ReLU - Linear(4096, 4096) - ReLU -
// Linear(4096, 10), batch 256, Adam, trained in fp32 on a synthetic task that can be learnt:
// the label of an input is the argmax of a fixed random linear "teacher". Prints the loss
// falling and the median step time.
//
//   ./build/examples/seed_mlp [steps=40] [batch=256]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <mixprec/mixprec.h>
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
  autograd::NoGradGuard no_grad;
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

int run(int steps, std::int64_t batch) {
  auto model = nn::sequential({std::make_shared<nn::Linear>(1024, 4096, true, 1),
                               std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(4096, 4096, true, 2),
                               std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(4096, 10, true, 3)});
  nn::Linear teacher(1024, 10, false, 99);
  const std::vector<Batch> batches = make_batches(8, batch, teacher);
  optim::Adam opt(model->parameters(), {.lr = 1e-4f});
  std::printf("seed_mlp: %lld parameters, batch %lld, fp32, Adam; cpu: %s\n",
              static_cast<long long>(model->parameter_count()), static_cast<long long>(batch),
              cpu_features().to_string().c_str());

  std::vector<double> step_ms;
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    const Batch& b = batches[static_cast<std::size_t>(step) % batches.size()];
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss = cross_entropy(model->forward(b.x), b.y);
    loss.backward();
    opt.step();
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
  std::printf("median step %.1f ms (min %.1f, max %.1f) over %zu steps; loss %.4f -> %.4f; peak %.1f MiB\n",
              median, steady.front(), steady.back(), steady.size(), first, last,
              static_cast<double>(mem.total_peak) / (1 << 20));
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
    if (steps < 2 || batch < 1) {
      std::fprintf(stderr, "usage: seed_mlp [steps >= 2] [batch >= 1]\n");
      return 2;
    }
    return run(steps, batch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seed_mlp: %s\n", e.what());
    return 1;
  }
}
