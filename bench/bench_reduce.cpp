// Reductions (sum, amax, norm2) over 1M..16M elements in f32 and bf16, at the best ISA this CPU
// allows, in the two layouts a training step meets: a whole buffer to one value ("all", e.g. the
// gradient norm and the scaler's overflow check) and a [rows, cols] matrix reduced along its rows
// ("rows": one value per row, inner = 1, contiguous) or along its columns ("cols": one value per
// column, the reduced axis strided by cols, e.g. a bias gradient).
// Bytes processed count every input byte once; times are wall-clock (UseRealTime), since the
// vector paths run on OpenMP threads. OMP_NUM_THREADS=1 compares single cores.
// BM_Gradient: see below. Run: bench_reduce --benchmark_min_time=0.1
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bench_values.h"
#include "kernels/reduce.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/half.h"

namespace {

using mixprec::DType;
namespace k = mixprec::kernels;

using mixprec::bench::values;

DType dtype_arg(std::int64_t a) { return a == 0 ? DType::f32 : DType::bf16; }

/// Layout of the reduction: 0 = whole buffer, 1 = along rows, 2 = along columns.
enum Layout : std::int64_t { kAll = 0, kRows = 1, kCols = 2 };

/// Reduces n elements laid out as a [n / 1024, 1024] matrix (or flat for kAll) into f32.
void BM_Reduce(benchmark::State& state, k::ReduceOp op) {
  const std::int64_t n = state.range(0);
  const auto layout = static_cast<Layout>(state.range(1));
  const DType t = dtype_arg(state.range(2));
  const std::int64_t cols = 1024, rows = n / cols;
  const auto x = values(t, n, -1.0f, 1.0f, 7);
  // [outer, n, inner] view of the reduction: the reduced axis is the middle one.
  std::int64_t outer = 1, mid = n, inner = 1;
  const char* label = "all";
  if (layout == kRows) {
    outer = rows, mid = cols, inner = 1, label = "rows";
  } else if (layout == kCols) {
    outer = 1, mid = rows, inner = cols, label = "cols";
  }
  std::vector<float> out(static_cast<std::size_t>(outer * inner));
  for (auto _ : state) {
    k::reduce(op, x.data(), t, outer, mid, inner, out.data(), DType::f32);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(label) + " " + mixprec::name(mixprec::max_isa()));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size()));
}

// Arguments: {elements, layout (0 all, 1 rows, 2 cols), dtype (0 f32, 1 bf16)}.
void Args(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {1 << 20, 1 << 22, 1 << 24}) {
    for (std::int64_t t : {0, 1}) {
      for (std::int64_t layout : {kAll, kRows, kCols}) b->Args({n, layout, t});
    }
  }
  b->ArgNames({"n", "layout", "bf16"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Reduce, sum, k::ReduceOp::sum)->Apply(Args);
BENCHMARK_CAPTURE(BM_Reduce, amax, k::ReduceOp::amax)->Apply(Args);
BENCHMARK_CAPTURE(BM_Reduce, norm2, k::ReduceOp::norm2)->Apply(Args);

// The seed MLP's gradient (21M f32 elements) reduced to one value, as clip_grad_norm's norm2 and
// a whole-tensor sum do it: the cpu backend (Highway, all threads) against the scalar reference
// and the memory floor, a memcpy of the same buffer in this binary. Bytes processed are the
// bytes read (the reduction) or read + written (memcpy), so GB/s compare directly.
constexpr std::int64_t kGradientElements = 21000000;

void BM_Gradient(benchmark::State& state, k::ReduceOp op, bool reference) {
  const auto x = values(DType::f32, kGradientElements, -1.0f, 1.0f, 11);
  float r = 0.0f;
  for (auto _ : state) {
    if (reference) {
      k::ref::reduce(op, x.data(), DType::f32, 1, kGradientElements, 1, &r, DType::f32);
    } else {
      k::cpu::reduce(op, x.data(), DType::f32, 1, kGradientElements, 1, &r, DType::f32);
    }
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel(reference ? "ref" : std::string("cpu ") + mixprec::simd_target());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(x.size()));
}

void BM_GradientMemcpy(benchmark::State& state) {
  const auto x = values(DType::f32, kGradientElements, -1.0f, 1.0f, 11);
  std::vector<std::uint8_t> y(x.size());
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), x.size());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel("floor");
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(x.size()));
}

BENCHMARK_CAPTURE(BM_Gradient, sum_cpu, k::ReduceOp::sum, false)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gradient, sum_ref, k::ReduceOp::sum, true)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gradient, norm2_cpu, k::ReduceOp::norm2, false)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gradient, norm2_ref, k::ReduceOp::norm2, true)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GradientMemcpy)->UseRealTime()->Unit(benchmark::kMillisecond);

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
