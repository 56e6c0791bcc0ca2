// One Adam step over 21M parameters (the size of a small transformer) on the cpu backend (the
// Highway kernel of the best target, all OpenMP threads) and on the scalar reference backend,
// against the memory-bandwidth floor measured in this binary:
//   f32 params + f32 grads:                 read p, g, m, v; write p, m, v  = 28 bytes/element
//   bf16 params + fp32 master + bf16 grads: read master, g, m, v; write master, m, v, bf16 p
//                                           = 4+2+4+4 + 4+4+4+2 = 28 bytes/element
// floor = bytes moved / copy bandwidth, the copy bandwidth being the best of a few parallel
// memcpy passes over 21M floats (copy/21M below; it counts bytes read + written, like the step;
// write-allocate reads are not counted on either side). "x_floor" = wall time per step / floor.
// Then a GPT's 76 tensors (4.8M elements): one single-tensor call per tensor against the
// multi-tensor calls, and Optimizer::step.
#include <benchmark/benchmark.h>

#include <chrono>
#include <utility>
#include <memory>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "copy_floor.h"
#include "kernels/backend.h"
#include "kernels/optim.h"
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

/// The parameter shapes of a 6-layer GPT of width 256 (tied embeddings): 76 tensors, from
/// 256-element biases and norms to 262K-element matrices, 4.8M elements in all.
std::vector<mixprec::Shape> gpt_shapes() {
  constexpr std::int64_t kWidth = 256, kLayers = 6;
  std::vector<mixprec::Shape> shapes = {{256, kWidth}, {128, kWidth}};
  for (std::int64_t l = 0; l < kLayers; ++l) {
    for (const mixprec::Shape& s : std::vector<mixprec::Shape>{
             {kWidth}, {kWidth}, {3 * kWidth, kWidth}, {3 * kWidth}, {kWidth, kWidth}, {kWidth},
             {kWidth}, {kWidth}, {4 * kWidth, kWidth}, {4 * kWidth}, {kWidth, 4 * kWidth}, {kWidth}}) {
      shapes.push_back(s);
    }
  }
  shapes.push_back({kWidth});
  shapes.push_back({kWidth});
  return shapes;
}

/// How bm_adamw_many_tensors updates the tensors.
enum class ManyTensors { per_tensor_calls, batched_calls, optimizer_step };

/// One AdamW update of a model's many tensors (f32 parameters and gradients): one
/// kernels::adam_update call per tensor (how Optimizer::step ran before the multi-tensor
/// entries: tensors below 32K elements on the calling thread, one parallel region per larger
/// one), kernels::adam_update_batch calls (48 tensors each, every tensor's chunks over all
/// threads together), or Optimizer::step itself (the batched calls plus its bookkeeping: the
/// scalars per parameter, versions, the weight-copy lookups). The same kernel and bits.
void bm_adamw_many_tensors(benchmark::State& state, ManyTensors how) {
  namespace k = mixprec::kernels;
  std::vector<Tensor> params;
  std::uint64_t seed = 10;
  double elements = 0;
  for (const mixprec::Shape& s : gpt_shapes()) {
    Tensor p = Tensor::randn(s, seed++, DType::f32, 0.0f, 0.02f);
    p.set_requires_grad();
    p.set_grad(Tensor::randn(s, seed++, DType::f32, 0.0f, 1e-3f));
    elements += static_cast<double>(p.numel());
    params.push_back(p);
  }
  mixprec::optim::AdamW opt(params, {.lr = 1e-4f});
  opt.step();  // warm-up, and the state the kernel calls update below
  k::AdamScalars scalars{};
  scalars.beta1 = 0.9f, scalars.one_minus_beta1 = 0.1f, scalars.beta2 = 0.999f;
  scalars.one_minus_beta2 = 0.001f, scalars.eps = 1e-8f, scalars.decay = 1.0f;
  scalars.step_size = 1e-4f, scalars.inv_sqrt_bias_correction2 = 1.0f;
  const auto state_tensors = opt.state_tensors();  // exp_avg, exp_avg_sq per parameter, in order
  std::vector<k::OptimRun<k::AdamScalars>> runs;
  for (std::size_t i = 0; i < params.size(); ++i) {
    k::OptimRun<k::AdamScalars> run{};
    run.arrays.param = params[i].data_ptr();
    run.arrays.grad = params[i].grad().data_ptr();
    run.arrays.state0 = static_cast<float*>(state_tensors[2 * i].second.data_ptr());
    run.arrays.state1 = static_cast<float*>(state_tensors[2 * i + 1].second.data_ptr());
    run.arrays.write = k::kWriteInPlace;
    run.scalars = scalars;
    run.count = static_cast<std::uint64_t>(params[i].numel());
    runs.push_back(run);
  }
  const auto batch = std::make_unique<k::AdamBatch>();
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (how == ManyTensors::optimizer_step) {
      opt.step();
    } else if (how == ManyTensors::per_tensor_calls) {
      for (const auto& run : runs) k::adam_update(run.arrays, run.scalars, run.count, 0);
    } else {
      for (std::size_t first = 0; first < runs.size(); first += k::kOptimBatchRuns) {
        batch->size = 0;
        for (std::size_t i = first; i < std::min(runs.size(), first + k::kOptimBatchRuns); ++i) {
          batch->runs[batch->size++] = runs[i];
        }
        k::adam_update_batch(*batch);
      }
    }
    benchmark::ClobberMemory();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  mixprec::bench::set_floor_counters(state, 28.0 * elements, g_copy_bytes_per_s, seconds);
  state.SetLabel(std::string("cpu ") + mixprec::simd_target() + ", " +
                 std::to_string(params.size()) + " tensors");
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
  const std::pair<const char*, ManyTensors> many[] = {
      {"adamw_gpt_76_tensors/per_tensor_calls", ManyTensors::per_tensor_calls},
      {"adamw_gpt_76_tensors/batched_calls", ManyTensors::batched_calls},
      {"adamw_gpt_76_tensors/optimizer_step", ManyTensors::optimizer_step}};
  for (const auto& [name, how] : many) {
    benchmark::RegisterBenchmark(name, bm_adamw_many_tensors, how)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
