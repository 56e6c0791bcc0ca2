// Elementwise, reduction, softmax and cross-entropy kernels at the best ISA this CPU allows
// against the scalar reference path (second argument: 1 = best ISA, 0 = Isa::scalar).
// Elementwise (BM_Unary, BM_Add): second argument "cpu" = 1 runs the cpu backend (Highway, best
// target), 0 the reference loops (kernels::ref); BM_Memcpy copies the same number of bytes a
// unary/binary kernel moves, on 1 and on all hardware threads: the memory-bandwidth floor of a
// kernel is (its bytes moved) / (the best memcpy bytes_per_second).
// Bytes processed count every byte read and written once; times are wall-clock (UseRealTime),
// since the vector paths run on OpenMP threads. OMP_NUM_THREADS=1 compares single cores.
// Run: bench_elementwise --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bench_values.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/half.h"

namespace {

using mixprec::DType;
using mixprec::Isa;
namespace k = mixprec::kernels;

using mixprec::bench::values;

/// Caps the ISA for one benchmark run (arg 1 = best, 0 = scalar) and labels it.
class IsaScope {
 public:
  explicit IsaScope(benchmark::State& state) : saved_(mixprec::max_isa()) {
    if (state.range(1) == 0) mixprec::set_max_isa(Isa::scalar);
    state.SetLabel(mixprec::name(mixprec::max_isa()));
  }
  ~IsaScope() { mixprec::set_max_isa(saved_); }

 private:
  Isa saved_;
};

DType dtype_arg(std::int64_t a) { return a == 0 ? DType::f32 : DType::bf16; }

/// Elementwise implementation of a run: the cpu backend at the best ISA, or the reference.
bool cpu_arg(benchmark::State& state) {
  state.SetLabel(state.range(1) != 0 ? std::string("cpu ") + mixprec::simd_target()
                                     : std::string("ref"));
  return state.range(1) != 0;
}

void BM_Unary(benchmark::State& state, k::UnaryOp op) {
  const bool cpu = cpu_arg(state);
  const DType t = dtype_arg(state.range(2));
  const std::int64_t n = state.range(0);
  const auto x = values(t, n, -4.0f, 4.0f, 1);
  std::vector<std::uint8_t> y(x.size());
  const std::int64_t shape[] = {n}, strides[] = {1};
  const auto fn = cpu ? &k::cpu::unary : &k::ref::unary;
  for (auto _ : state) {
    fn(op, std::span<const std::int64_t>(shape), {x.data(), t, strides}, y.data(), t);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(x.size()));
}

void BM_Add(benchmark::State& state) {
  const bool cpu = cpu_arg(state);
  const DType t = dtype_arg(state.range(2));
  const std::int64_t n = state.range(0);
  const auto a = values(t, n, -4.0f, 4.0f, 1), b = values(t, n, -4.0f, 4.0f, 2);
  std::vector<std::uint8_t> y(a.size());
  const std::int64_t shape[] = {n}, strides[] = {1};
  const auto fn = cpu ? &k::cpu::binary : &k::ref::binary;
  for (auto _ : state) {
    fn(k::BinaryOp::add, std::span<const std::int64_t>(shape), {a.data(), t, strides}, {b.data(), t, strides}, y.data(), t);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<std::int64_t>(a.size()));
}

/// memcpy of range(0) bytes on range(1) threads (0 = every hardware thread), each thread one
/// contiguous slice: bytes_per_second (read + write) is the copy bandwidth the floors use.
void BM_Memcpy(benchmark::State& state) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = state.range(1) == 0 ? hw : static_cast<unsigned>(state.range(1));
  std::vector<std::uint8_t> src(bytes, 1), dst(bytes, 0);
  auto copy = [&](unsigned i) {
    const std::size_t begin = bytes * i / threads, end = bytes * (i + 1) / threads;
    std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
  };
  for (auto _ : state) {
    if (threads == 1) {
      copy(0);
    } else {
      std::vector<std::thread> pool;
      for (unsigned i = 1; i < threads; ++i) pool.emplace_back(copy, i);
      copy(0);
      for (std::thread& th : pool) th.join();
    }
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetLabel(std::to_string(threads) + " threads");
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(bytes));
}

void BM_Reduce(benchmark::State& state, k::ReduceOp op) {
  IsaScope isa(state);
  const DType t = dtype_arg(state.range(2));
  const std::int64_t n = state.range(0);
  const auto x = values(t, n, -1.0f, 1.0f, 3);
  float r = 0;
  for (auto _ : state) {
    k::reduce(op, x.data(), t, 1, n, 1, &r, DType::f32);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size()));
}

void BM_Softmax(benchmark::State& state) {
  IsaScope isa(state);
  const std::int64_t rows = 256, cols = state.range(0);
  const DType t = dtype_arg(state.range(2));
  const auto x = values(t, rows * cols, -8.0f, 8.0f, 4);
  std::vector<std::uint8_t> y(x.size());
  for (auto _ : state) {
    k::softmax(x.data(), t, rows, cols, y.data(), t, false);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(x.size()));
}

void BM_CrossEntropy(benchmark::State& state) {
  IsaScope isa(state);
  const std::int64_t rows = 256, cols = state.range(0);
  const DType t = dtype_arg(state.range(2));
  const auto x = values(t, rows * cols, -8.0f, 8.0f, 5);
  std::vector<std::int64_t> target(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) target[r] = (r * 7) % cols;
  std::vector<float> loss(static_cast<std::size_t>(rows)), grad(loss.size(), 1.0f);
  std::vector<std::uint8_t> dx(x.size());
  for (auto _ : state) {  // forward and backward, as one training step runs them
    k::cross_entropy(x.data(), t, rows, cols, target.data(), 0.1f, loss.data());
    k::cross_entropy_backward(x.data(), t, rows, cols, target.data(), 0.1f, grad.data(),
                              dx.data(), t);
    benchmark::DoNotOptimize(dx.data());
  }
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<std::int64_t>(x.size()));
}

// Arguments: {elements or cols, isa (1 best, 0 scalar), dtype (0 f32, 1 bf16)}.
void Args1M(benchmark::internal::Benchmark* b) {
  for (std::int64_t t : {0, 1}) {
    for (std::int64_t isa : {1, 0}) b->Args({1 << 20, isa, t});
  }
}
void ArgsRows(benchmark::internal::Benchmark* b) {
  for (std::int64_t cols : {4096, 10}) {
    for (std::int64_t t : {0, 1}) {
      for (std::int64_t isa : {1, 0}) b->Args({cols, isa, t});
    }
  }
}

void Elements(benchmark::internal::Benchmark* b) {
  Args1M(b);
  b->ArgNames({"n", "best", "bf16"})->UseRealTime();
}
void RowArgs(benchmark::internal::Benchmark* b) {
  ArgsRows(b);
  b->ArgNames({"cols", "best", "bf16"})->UseRealTime();
}

// Elementwise: {elements, cpu (1) or ref (0), dtype (0 f32, 1 bf16)} at 4M elements.
void Elementwise4M(benchmark::internal::Benchmark* b) {
  for (std::int64_t t : {0, 1}) {
    for (std::int64_t cpu : {1, 0}) b->Args({1 << 22, cpu, t});
  }
  b->ArgNames({"n", "cpu", "bf16"})->UseRealTime();
}
// The bytes of one 4M-element f32 and bf16 array (a unary kernel moves 2x, add 3x).
void MemcpyArgs(benchmark::internal::Benchmark* b) {
  for (std::int64_t bytes : {std::int64_t{4} << 22, std::int64_t{2} << 22}) {
    for (std::int64_t threads : {1, 0}) b->Args({bytes, threads});
  }
  b->ArgNames({"bytes", "threads"})->UseRealTime();
}

BENCHMARK(BM_Memcpy)->Apply(MemcpyArgs);
BENCHMARK(BM_Add)->Apply(Elementwise4M);
BENCHMARK_CAPTURE(BM_Unary, relu, k::UnaryOp::relu)->Apply(Elementwise4M);
BENCHMARK_CAPTURE(BM_Unary, gelu, k::UnaryOp::gelu)->Apply(Elementwise4M);
BENCHMARK_CAPTURE(BM_Unary, gelu_tanh, k::UnaryOp::gelu_tanh)->Apply(Elementwise4M);
BENCHMARK_CAPTURE(BM_Unary, exp, k::UnaryOp::exp)->Apply(Elementwise4M);
BENCHMARK_CAPTURE(BM_Reduce, sum, k::ReduceOp::sum)->Apply(Elements);
BENCHMARK_CAPTURE(BM_Reduce, amax, k::ReduceOp::amax)->Apply(Elements);
BENCHMARK_CAPTURE(BM_Reduce, norm2, k::ReduceOp::norm2)->Apply(Elements);
BENCHMARK(BM_Softmax)->Apply(RowArgs);
BENCHMARK(BM_CrossEntropy)->Apply(RowArgs);

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
