// One Adam step over 21M parameters (the size of a small transformer) on the cpu backend (the
// Highway kernel of the best target, all OpenMP threads) and on the scalar reference backend,
// against the memory-bandwidth floor measured in this binary:
//   f32 params + f32 grads:                 read p, g, m, v; write p, m, v  = 28 bytes/element
//   bf16 params + fp32 master + bf16 grads: read master, g, m, v; write master, m, v, bf16 p
//                                           = 4+2+4+4 + 4+4+4+2 = 28 bytes/element
// floor = bytes moved / copy bandwidth, the copy bandwidth being the best of a few parallel
// memcpy passes over 21M floats (copy/21M below; it counts bytes read + written, like the step;
// write-allocate reads are not counted on either side). "x_floor" = wall time per step / floor.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "copy_floor.h"
#include "kernels/backend.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/adam.h"

namespace {

using mixprec::DType;
using mixprec::Tensor;

constexpr std::int64_t kParams = 21'000'000;

struct Variant {
  const char* name;
  DType param;
  DType grad;
  double bytes_per_element;
};

const Variant kVariants[] = {
    {"f32_param_f32_grad", DType::f32, DType::f32, 28.0},
    {"bf16_param_fp32_master_bf16_grad", DType::bf16, DType::bf16, 28.0},
};

double g_copy_bytes_per_s = 0;

void bm_adamw_step(benchmark::State& state, Variant v, const std::string& backend) {
  const std::string previous = mixprec::kernels::set_backend(backend);
  Tensor p = Tensor::randn({kParams}, 1, v.param, 0.0f, 0.02f);
  p.set_requires_grad();
  p.set_grad(Tensor::randn({kParams}, 2, v.grad, 0.0f, 1e-3f));
  mixprec::optim::AdamW opt({p}, {.lr = 1e-4f});
  opt.step();  // warm-up: first touch of the state pages happens here
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    opt.step();
    benchmark::ClobberMemory();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  mixprec::kernels::set_backend(previous);
  const double bytes = v.bytes_per_element * static_cast<double>(kParams);
  mixprec::bench::set_floor_counters(state, bytes, g_copy_bytes_per_s, seconds);
  state.SetLabel(backend == "cpu" ? std::string("cpu ") + mixprec::simd_target() : backend);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  g_copy_bytes_per_s = mixprec::bench::register_copy_floor(
      "copy_21M_f32", static_cast<std::int64_t>(kParams) * 4);
  for (const Variant& v : kVariants) {
    for (const char* backend : {"cpu", "ref"}) {
      const std::string name = std::string("adamw_step_21M/") + v.name + "/" + backend;
      benchmark::RegisterBenchmark(name.c_str(), bm_adamw_step, v, std::string(backend))
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
