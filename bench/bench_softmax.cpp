// Softmax and cross-entropy, forward and backward, at the shapes a training step meets:
// [256, 10] (the classifier head of the seed MLP / CNN: tiny, dominated by per-call overhead)
// and [4096, 1024] (a large vocabulary-like row, bandwidth-bound), in f32 and bf16, at the best
// ISA this CPU allows. Bytes processed count every byte read and written once; times are
// wall-clock (UseRealTime), since the vector paths run on OpenMP threads.
// Run: bench_softmax --benchmark_min_time=0.1
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench_values.h"
#include "kernels/softmax.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/half.h"

namespace {

using mixprec::DType;
namespace k = mixprec::kernels;

using mixprec::bench::values;

DType dtype_arg(std::int64_t a) { return a == 0 ? DType::f32 : DType::bf16; }

void label(benchmark::State& state) { state.SetLabel(mixprec::name(mixprec::max_isa())); }

void BM_SoftmaxForward(benchmark::State& state, bool log) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  const DType t = dtype_arg(state.range(2));
  const auto x = values(t, rows * cols, -8.0f, 8.0f, 1);
  std::vector<std::uint8_t> y(x.size());
  for (auto _ : state) {
    k::softmax(x.data(), t, rows, cols, y.data(), t, log);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  label(state);
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(x.size()));
}

void BM_SoftmaxBackward(benchmark::State& state, bool log) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  const DType t = dtype_arg(state.range(2));
  const auto x = values(t, rows * cols, -8.0f, 8.0f, 2);
  const auto dy = values(t, rows * cols, -1.0f, 1.0f, 3);
  std::vector<std::uint8_t> y(x.size()), dx(x.size());
  k::softmax(x.data(), t, rows, cols, y.data(), t, log);  // a real output, not random numbers
  for (auto _ : state) {
    k::softmax_backward(y.data(), t, dy.data(), t, rows, cols, dx.data(), t, log);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  label(state);
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<std::int64_t>(x.size()));
}

/// Targets r * 7 mod cols: deterministic, spread over all classes.
std::vector<std::int64_t> targets(std::int64_t rows, std::int64_t cols) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) t[static_cast<std::size_t>(r)] = (r * 7) % cols;
  return t;
}

void BM_CrossEntropyForward(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  const DType t = dtype_arg(state.range(2));
  const auto x = values(t, rows * cols, -8.0f, 8.0f, 4);
  const auto target = targets(rows, cols);
  std::vector<float> loss(static_cast<std::size_t>(rows));
  for (auto _ : state) {
    k::cross_entropy(x.data(), t, rows, cols, target.data(), 0.0f, loss.data());
    benchmark::DoNotOptimize(loss.data());
    benchmark::ClobberMemory();
  }
  label(state);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size()));
}

void BM_CrossEntropyBackward(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  const DType t = dtype_arg(state.range(2));
  const auto x = values(t, rows * cols, -8.0f, 8.0f, 5);
  const auto target = targets(rows, cols);
  const std::vector<float> grad(static_cast<std::size_t>(rows), 1.0f / static_cast<float>(rows));
  std::vector<std::uint8_t> dx(x.size());
  for (auto _ : state) {
    k::cross_entropy_backward(x.data(), t, rows, cols, target.data(), 0.0f, grad.data(),
                              dx.data(), t);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  label(state);
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(x.size()));
}

// Arguments: {rows, cols, dtype (0 f32, 1 bf16)}.
void Shapes(benchmark::internal::Benchmark* b) {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{256, 10}, {4096, 1024}}) {
    for (std::int64_t t : {0, 1}) b->Args({rows, cols, t});
  }
  b->ArgNames({"rows", "cols", "bf16"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_SoftmaxForward, softmax, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_SoftmaxForward, log_softmax, true)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_SoftmaxBackward, softmax, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_SoftmaxBackward, log_softmax, true)->Apply(Shapes);
BENCHMARK(BM_CrossEntropyForward)->Apply(Shapes);
BENCHMARK(BM_CrossEntropyBackward)->Apply(Shapes);

// softmax over [256, 4096] f32: the cpu backend (Highway, all threads) against the scalar
// reference and the memory floor, a memcpy of the same 4 MB in -> out in this binary. Bytes
// processed are read + written in all three, so GB/s compare directly.
void BM_Softmax256x4096(benchmark::State& state, bool reference) {
  constexpr std::int64_t rows = 256, cols = 4096;
  const auto x = values(DType::f32, rows * cols, -8.0f, 8.0f, 3);
  std::vector<std::uint8_t> y(x.size());
  for (auto _ : state) {
    if (reference) {
      k::ref::softmax(x.data(), DType::f32, rows, cols, y.data(), DType::f32, false);
    } else {
      k::cpu::softmax(x.data(), DType::f32, rows, cols, y.data(), DType::f32, false);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(reference ? "ref" : std::string("cpu ") + mixprec::simd_target());
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(x.size()));
}

void BM_Softmax256x4096Memcpy(benchmark::State& state) {
  const auto x = values(DType::f32, 256 * 4096, -8.0f, 8.0f, 3);
  std::vector<std::uint8_t> y(x.size());
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), x.size());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel("floor");
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(x.size()));
}

BENCHMARK_CAPTURE(BM_Softmax256x4096, cpu, false)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Softmax256x4096, ref, true)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Softmax256x4096Memcpy)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_flags", mixprec::cpu_features().to_string());
  benchmark::AddCustomContext("max_isa", mixprec::name(mixprec::max_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
