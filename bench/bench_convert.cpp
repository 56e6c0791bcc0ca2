// Bulk dtype conversions on 1M elements, at the best ISA this CPU allows and at Isa::scalar.
// Bytes/s counts bytes read plus bytes written.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "mixprec/core/convert.h"
#include "mixprec/core/cpu_features.h"

namespace mixprec {
namespace {

constexpr std::size_t kN = std::size_t{1} << 20;

/// Values of a realistic spread (activations/gradients), no NaN.
std::vector<float> make_input() {
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(kN);
  for (float& x : v) x = normal(gen);
  return v;
}

/// Range(0) == 0: Isa::scalar; == 1: the best ISA of this CPU (restored afterwards).
template <class Body>
void run(benchmark::State& state, std::size_t bytes_per_element, Body body) {
  const Isa before = max_isa();
  const Isa isa = state.range(0) == 0 ? Isa::scalar : before;
  set_max_isa(isa);
  state.SetLabel(name(isa));
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  set_max_isa(before);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(kN * bytes_per_element));
}

void BM_f32_to_bf16(benchmark::State& state) {
  const std::vector<float> src = make_input();
  std::vector<bfloat16> dst(kN);
  run(state, 6, [&] { convert_f32_to_bf16(src.data(), dst.data(), kN); });
}

void BM_bf16_to_f32(benchmark::State& state) {
  const std::vector<float> f = make_input();
  std::vector<bfloat16> src(kN);
  convert_f32_to_bf16(f.data(), src.data(), kN);
  std::vector<float> dst(kN);
  run(state, 6, [&] { convert_bf16_to_f32(src.data(), dst.data(), kN); });
}

void BM_f32_to_f16(benchmark::State& state) {
  const std::vector<float> src = make_input();
  std::vector<float16> dst(kN);
  run(state, 6, [&] { convert_f32_to_f16(src.data(), dst.data(), kN); });
}

void BM_f16_to_f32(benchmark::State& state) {
  const std::vector<float> f = make_input();
  std::vector<float16> src(kN);
  convert_f32_to_f16(f.data(), src.data(), kN);
  std::vector<float> dst(kN);
  run(state, 6, [&] { convert_f16_to_f32(src.data(), dst.data(), kN); });
}

void BM_f32_to_bf16_stochastic(benchmark::State& state) {
  const std::vector<float> src = make_input();
  std::vector<bfloat16> dst(kN);
  std::uint64_t step = 0;
  run(state, 6, [&] {
    convert_f32_to_bf16_stochastic(src.data(), dst.data(), kN, 42, kN * step++);
  });
}

void BM_f32_to_f16_stochastic(benchmark::State& state) {
  const std::vector<float> src = make_input();
  std::vector<float16> dst(kN);
  std::uint64_t step = 0;
  run(state, 6, [&] {
    convert_f32_to_f16_stochastic(src.data(), dst.data(), kN, 42, kN * step++);
  });
}

// Wall-clock rates: the conversions run on OpenMP threads, so the main thread's CPU time
// would overstate them.
BENCHMARK(BM_f32_to_bf16)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_bf16_to_f32)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_f32_to_f16)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_f16_to_f32)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_f32_to_bf16_stochastic)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_f32_to_f16_stochastic)->Arg(1)->Arg(0)->UseRealTime();

}  // namespace
}  // namespace mixprec

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_flags", mixprec::cpu_features().to_string());
  benchmark::AddCustomContext("max_isa", mixprec::name(mixprec::max_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
