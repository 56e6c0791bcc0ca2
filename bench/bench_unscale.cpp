// The fused unscale + non-finite check of GradScaler over 21M f32 gradients (a small transformer's
// worth), scalar reference vs AVX-512:
//   dispatch/<isa>:      kernels::unscale_inplace, what GradScaler::unscale runs (OpenMP over all
//                        threads above 32K elements), capped at the given ISA;
//   kernel_1thread/<impl>: the raw kernel on one thread (unscale_f32_ref vs unscale_f32_avx512).
// "GB" counts 8 bytes per element (read 4, write 4 in place): the minimum the pass must move.
// The inverse scale alternates between 2^-16 and 2^16, so the data stay in the normal range
// (subnormal results would measure microcode assists, not the kernel).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "kernels/cpu/unscale_kernels.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/tensor.h"

namespace {

using mixprec::Isa;
using mixprec::Tensor;

constexpr std::int64_t kGrads = 21'000'000;
constexpr double kBytesPerElement = 8.0;

/// Caps the ISA for one benchmark and restores it afterwards.
class IsaCap {
 public:
  explicit IsaCap(Isa cap) { mixprec::set_max_isa(cap); }
  ~IsaCap() { mixprec::set_max_isa(saved_); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;

 private:
  Isa saved_ = mixprec::max_isa();
};

float inverse(std::int64_t iteration) { return iteration % 2 == 0 ? 1.0f / 65536.0f : 65536.0f; }

void set_rate(benchmark::State& state) {
  state.counters["GB"] = benchmark::Counter(kBytesPerElement * static_cast<double>(kGrads) * 1e-9,
                                            benchmark::Counter::kIsIterationInvariantRate);
}

void bm_dispatch(benchmark::State& state, Isa isa) {
  if (isa > mixprec::max_isa()) {
    state.SkipWithError("this CPU (or MIXPREC_ISA) does not allow the requested ISA");
    return;
  }
  const IsaCap cap(isa);
  Tensor g = Tensor::randn({kGrads}, 3, mixprec::DType::f32, 0.0f, 65536.0f * 1e-3f);
  std::int64_t k = 0;
  bool found = false;
  for (auto _ : state) {
    found |= mixprec::kernels::unscale_inplace(g.data_ptr(), mixprec::kernels::kUnscaleF32,
                                               static_cast<std::size_t>(kGrads), inverse(k++));
    benchmark::ClobberMemory();
  }
  if (found) state.SkipWithError("unexpected non-finite gradient");
  set_rate(state);
  state.SetLabel(mixprec::name(isa));
}

void bm_kernel_1thread(benchmark::State& state, bool avx512) {
  if (avx512 && mixprec::max_isa() < Isa::avx512) {
    state.SkipWithError("this CPU (or MIXPREC_ISA) does not allow AVX-512");
    return;
  }
  Tensor g = Tensor::randn({kGrads}, 3, mixprec::DType::f32, 0.0f, 65536.0f * 1e-3f);
  float* p = g.data<float>();
  const auto n = static_cast<std::size_t>(kGrads);
  std::int64_t k = 0;
  bool found = false;
  for (auto _ : state) {
    const float inv = inverse(k++);
    found |= avx512 ? mixprec::kernels::unscale_f32_avx512(p, p, n, inv)
                    : mixprec::kernels::unscale_f32_ref(p, p, n, inv);
    benchmark::ClobberMemory();
  }
  if (found) state.SkipWithError("unexpected non-finite gradient");
  set_rate(state);
  state.SetLabel(avx512 ? "avx512" : "reference");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_flags", mixprec::cpu_features().to_string());
  for (const Isa isa : {Isa::scalar, Isa::avx512}) {
    const std::string name = std::string("unscale_21M/dispatch/") + mixprec::name(isa);
    benchmark::RegisterBenchmark(name.c_str(), bm_dispatch, isa)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (const bool avx512 : {false, true}) {
    const std::string name =
        std::string("unscale_21M/kernel_1thread/") + (avx512 ? "avx512" : "reference");
    benchmark::RegisterBenchmark(name.c_str(), bm_kernel_1thread, avx512)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
