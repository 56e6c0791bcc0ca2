// The fused unscale + non-finite check of GradScaler over 21M gradients (a small transformer's
// worth) on the cpu backend (the Highway kernel of the best target, all OpenMP threads) and the
// scalar reference backend, against the memory-bandwidth floor measured in this binary:
//   f32: read 4 + write 4 = 8 bytes/element;  bf16/f16: 2 + 2 = 4 bytes/element (in place).
// floor = bytes moved / copy bandwidth, the copy bandwidth being the best of a few parallel
// memcpy passes over 21M floats (copy/21M below, bytes read + written). "x_floor" = time / floor.
// The inverse scale alternates between 2^-8 and 2^8, so the data stay in the normal range
// (subnormal results would measure microcode assists, not the kernel).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "copy_floor.h"
#include "kernels/backend.h"
#include "kernels/unscale.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/tensor/tensor.h"

namespace {

using mixprec::DType;
using mixprec::Tensor;

constexpr std::int64_t kGrads = 21'000'000;

double g_copy_bytes_per_s = 0;

void bm_unscale(benchmark::State& state, DType dtype, const std::string& backend) {
  const std::string previous = mixprec::kernels::set_backend(backend);
  Tensor g = Tensor::randn({kGrads}, 3, dtype, 0.0f, 1.0f);
  std::int64_t k = 0;
  bool found = false;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const float inv = k++ % 2 == 0 ? 1.0f / 256.0f : 256.0f;
    found |= mixprec::kernels::unscale_inplace(g.data_ptr(), dtype,
                                               static_cast<std::size_t>(kGrads), inv);
    benchmark::ClobberMemory();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  mixprec::kernels::set_backend(previous);
  if (found) state.SkipWithError("unexpected non-finite gradient");
  const double bytes = 2.0 * static_cast<double>(mixprec::size_of(dtype)) * static_cast<double>(kGrads);
  mixprec::bench::set_floor_counters(state, bytes, g_copy_bytes_per_s, seconds);
  state.SetLabel(backend == "cpu" ? std::string("cpu ") + mixprec::simd_target() : backend);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  g_copy_bytes_per_s = mixprec::bench::register_copy_floor(
      "copy_21M_f32", static_cast<std::int64_t>(kGrads) * 4);
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const char* backend : {"cpu", "ref"}) {
      const std::string name = std::string("unscale_21M/") + mixprec::name(dtype) + "/" + backend;
      benchmark::RegisterBenchmark(name.c_str(), bm_unscale, dtype, std::string(backend))
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
