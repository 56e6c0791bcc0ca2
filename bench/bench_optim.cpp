// AdamW step over 21M parameters (the size of a small transformer), scalar reference vs the
// fused AVX-512 kernel:
//   f32 params + f32 grads:                 read p, g, m, v; write p, m, v  = 28 bytes/element
//   bf16 params + fp32 master + bf16 grads: read master, g, m, v; write master, m, v, bf16 p
//                                           = 4+2+4+4 + 4+4+4+2 = 28 bytes/element
// "GB=x/s" counts those bytes (the minimum a fused step must move; write-allocate reads of the
// written lines are not counted). Both run on all OpenMP threads: timed on the wall clock.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/tensor.h"
#include "mixprec/optim/adam.h"

namespace {

using mixprec::DType;
using mixprec::Isa;
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

void bm_adamw_step(benchmark::State& state, Variant v, Isa isa) {
  if (isa > mixprec::max_isa()) {
    state.SkipWithError("this CPU (or MIXPREC_ISA) does not allow the requested ISA");
    return;
  }
  const IsaCap cap(isa);
  Tensor p = Tensor::randn({kParams}, 1, v.param, 0.0f, 0.02f);
  p.set_requires_grad();
  p.set_grad(Tensor::randn({kParams}, 2, v.grad, 0.0f, 1e-3f));
  mixprec::optim::AdamW opt({p}, {.lr = 1e-4f});
  opt.step();  // warm-up: first touch of the state pages happens here
  for (auto _ : state) {
    opt.step();
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter(v.bytes_per_element * static_cast<double>(kParams) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(mixprec::name(isa));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_flags", mixprec::cpu_features().to_string());
  for (const Variant& v : kVariants) {
    for (const Isa isa : {Isa::scalar, Isa::avx512}) {
      const std::string name = std::string("adamw_step_21M/") + v.name + "/" + mixprec::name(isa);
      benchmark::RegisterBenchmark(name.c_str(), bm_adamw_step, v, isa)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
