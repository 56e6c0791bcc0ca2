// DataLoader throughput on Fashion-MNIST-sized data (60000 x 784 f32, synthetic), batch 128,
// shuffled; one benchmark iteration = one batch (a new epoch starts when one runs out).
//   loader_only/prefetch:{0,1}: next() in a tight loop: the cost of gathering 128 random rows
//     (memcpy per row + finiteness check + a fresh 401 KB tensor), and with prefetch the
//     hand-over between threads on top of it;
//   with_step/prefetch:{0,1}: next() followed by a simulated 500 us training step (spinning on
//     the clock after next() returns), to show prefetch hiding the gather behind the step:
//     ideally prefetch:0 takes 500 us + the gather per batch, prefetch:1 just 500 us (2000
//     batches/s) when a second core is free for the producer.
// "batches/s" is the rate per second of wall time (the producer thread runs besides).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

#include "mixprec/tensor/tensor.h"
#include "mixprec/data/dataloader.h"

namespace {

using mixprec::Tensor;
using mixprec::data::Batch;
using mixprec::data::DataLoader;
using mixprec::data::DataLoaderOptions;
using mixprec::data::Dataset;

constexpr std::int64_t kSamples = 60000;
constexpr std::int64_t kFeatures = 784;
constexpr std::int64_t kBatch = 128;

const Dataset& data() {
  static const Dataset d = [] {
    Dataset out;
    out.images = Tensor::uniform({kSamples, kFeatures}, 1, -1.0f, 1.0f);  // cheaper than randn
    out.labels.resize(kSamples);
    for (std::int64_t i = 0; i < kSamples; ++i) out.labels[static_cast<std::size_t>(i)] = i % 10;
    return out;
  }();
  return d;
}

// The training step: reads the batch, then spins until `micros` have passed since `start`.
float simulated_step(const Batch& b, std::chrono::steady_clock::time_point start, int micros) {
  const float* x = b.inputs.data<float>();
  float acc = 0;
  for (std::int64_t i = 0; i < b.inputs.numel(); i += 16) acc += x[i];
  while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(micros)) {
    benchmark::DoNotOptimize(acc);
  }
  return acc;
}

void bm_loader(benchmark::State& state, int step_micros) {
  DataLoaderOptions opts;
  opts.batch_size = kBatch;
  opts.prefetch = state.range(0) != 0;
  opts.seed = 3;
  DataLoader loader(data(), opts, {1, 28, 28});
  std::int64_t epoch = 0;
  loader.start_epoch(epoch);
  Batch b;
  float sink = 0;
  for (auto _ : state) {
    if (!loader.next(b)) {
      loader.start_epoch(++epoch);
      loader.next(b);
    }
    if (step_micros > 0) sink += simulated_step(b, std::chrono::steady_clock::now(), step_micros);
    benchmark::DoNotOptimize(b.inputs.data_ptr());
  }
  benchmark::DoNotOptimize(sink);
  state.counters["batches/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MB/s"] = benchmark::Counter(
      static_cast<double>(kBatch * kFeatures * 4) * 1e-6, benchmark::Counter::kIsIterationInvariantRate);
}

void loader_only(benchmark::State& state) { bm_loader(state, 0); }
void with_step(benchmark::State& state) { bm_loader(state, 500); }

// Wall time: with prefetch the work happens on another thread, which CPU time would not count.
BENCHMARK(loader_only)->ArgName("prefetch")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(with_step)->ArgName("prefetch")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
