// Batch norm forward + backward (training mode, affine) at the Fashion-MNIST CNN's shapes:
// the kernels alone through kernels::cpu (Highway) and kernels::ref (scalar spec), a memcpy
// moving the same bytes (the bandwidth floor), and the op with autograd (allocation and
// running-stat update included). And the CNN's batch norm + ReLU + max pool fused and apart, and
// a transformer's residual add + layer norm, fused and apart.
//   OMP_NUM_THREADS=1 ./bench_norm ; OMP_NUM_THREADS=2 ./bench_norm
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/batch_norm_stats.h"
#include "kernels/norm.h"
#include "mixprec/mixprec.h"
#include "mixprec/ops/normalization.h"

namespace {

using mixprec::DType;
using mixprec::Tensor;

DType dtype_arg(std::int64_t v) { return v == 0 ? DType::f32 : DType::bf16; }

void set_label(benchmark::State& state, DType dt, std::int64_t numel) {
  state.SetLabel(mixprec::name(dt));
  // Bytes touched once per step: forward reads x, writes y; backward reads x and dy, writes dx.
  state.SetBytesProcessed(state.iterations() * numel * 5 *
                          static_cast<std::int64_t>(mixprec::size_of(dt)));
}

void BM_BatchNormKernels(benchmark::State& state) {
  namespace k = mixprec::kernels;
  const DType dt = dtype_arg(state.range(0));
  const bool ref = state.range(3) != 0;
  // Channels-last: the same activation as [N * H * W, C] rows of one pixel's channels each (the
  // per-column path), instead of N x C planes of H * W values (the row path).
  const bool channels_last = state.range(4) != 0;
  auto forward = ref ? &k::ref::batch_norm_forward : &k::cpu::batch_norm_forward;
  auto backward = ref ? &k::ref::batch_norm_backward : &k::cpu::batch_norm_backward;
  const std::int64_t hw = state.range(2) * state.range(2);
  const mixprec::kernels::BatchNormDims d = channels_last
                                                ? mixprec::kernels::BatchNormDims{128 * hw, state.range(1), 1}
                                                : mixprec::kernels::BatchNormDims{128, state.range(1), hw};
  const Tensor x = Tensor::randn({d.n, d.c, d.s}, 1, dt);
  const Tensor dy = Tensor::randn({d.n, d.c, d.s}, 2, dt);
  Tensor y = Tensor::empty(x.shape(), dt), dx = Tensor::empty(x.shape(), dt);
  const auto c = static_cast<std::size_t>(d.c);
  std::vector<float> w(c, 1.0f), b(c, 0.0f), mean(c), var(c), dw(c), db(c);
  for (auto _ : state) {
    forward(x.data_ptr(), dt, d, w.data(), b.data(), 1e-5f, true, mean.data(), var.data(),
            y.data_ptr(), dt, nullptr, false);
    backward(x.data_ptr(), dt, dy.data_ptr(), dt, d, mean.data(), var.data(), 1e-5f, w.data(),
             true, dx.data_ptr(), dt, dw.data(), db.data(), nullptr, nullptr);
    benchmark::DoNotOptimize(dx.data_ptr());
  }
  set_label(state, dt, x.numel());
  state.SetLabel(std::string(mixprec::name(dt)) + (ref ? " ref" : " cpu") +
                 (channels_last ? " channels-last" : ""));
}

// The floor: memcpy of half the bytes forward + backward move (a copy reads and writes each).
void BM_BatchNormMemcpyFloor(benchmark::State& state) {
  const DType dt = dtype_arg(state.range(0));
  const std::int64_t numel = 128 * state.range(1) * state.range(2) * state.range(2);
  const auto bytes = static_cast<std::size_t>(numel * 5 * static_cast<std::int64_t>(mixprec::size_of(dt)));
  std::vector<char> src(bytes / 2, 1), dst(bytes / 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
  set_label(state, dt, numel);
}

void BM_BatchNormOp(benchmark::State& state) {
  const DType dt = dtype_arg(state.range(0));
  const std::int64_t c = state.range(1), hw = state.range(2);
  Tensor x = Tensor::randn({128, c, hw, hw}, 1, dt);
  x.set_requires_grad(true);
  Tensor w = Tensor::ones({c}), b = Tensor::zeros({c});
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor rm = Tensor::zeros({c}), rv = Tensor::ones({c});
  const Tensor dy = Tensor::randn(x.shape(), 2, dt);
  for (auto _ : state) {
    const Tensor y = mixprec::batch_norm(x, rm, rv, w, b, true);
    y.backward(dy);
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    b.set_grad(Tensor());
  }
  set_label(state, dt, x.numel());
}

// A convnet's batch norm and the ReLU after it (the CNN's and ResNet's conv-BN-ReLU), forward
// and backward: fused = 1 runs batch_norm_relu (one pass over the activations each way), 0
// runs batch_norm() then relu() (the norm writes its output, the ReLU reads it back; backward,
// the ReLU writes its gradient and the norm reads it). Same bits either way (tests).
void BM_BatchNormRelu(benchmark::State& state) {
  const bool fused = state.range(0) != 0;
  const DType dt = state.range(1) != 0 ? DType::bf16 : DType::f32;
  const std::int64_t c = state.range(2), hw = state.range(3);
  Tensor x = Tensor::randn({128, c, hw, hw}, 1, dt);
  x.set_requires_grad(true);
  Tensor w = Tensor::ones({c}), b = Tensor::zeros({c});
  Tensor rm = Tensor::zeros({c}), rv = Tensor::ones({c});
  const Tensor dy = Tensor::randn(x.shape(), 2, dt);
  for (auto _ : state) {
    const Tensor y = fused ? mixprec::batch_norm_relu(x, rm, rv, w, b, true)
                           : mixprec::relu(mixprec::batch_norm(x, rm, rv, w, b, true));
    y.backward(dy);
    x.set_grad(Tensor());
  }
  state.SetLabel(std::string(fused ? "batch_norm_relu " : "batch_norm then relu ") +
                 mixprec::name(dt));
}

// The CNN's BN-ReLU-pool on channels-last activations, kernels alone (kernels::cpu), forward
// then backward: fused = 1 runs batch_norm_relu_max_pool2d (the pooled output and a byte of
// argmax written; backward from those), 0 the kernels it replaces (batch_norm_forward with its
// ReLU writing the full activation, max_pool2d with int32 argmax; max_pool2d_backward writing
// the full gradient, batch_norm_backward reading it and the ReLU mask). Bytes: the fused op's
// (x read twice and the pooled outputs forward; x twice, dx, the pooled values back).
void BM_BatchNormReluPool(benchmark::State& state) {
  namespace k = mixprec::kernels;
  const bool fused = state.range(0) != 0;
  const DType dt = state.range(1) != 0 ? DType::bf16 : DType::f32;
  const std::int64_t c = state.range(2), hw = state.range(3);
  k::Pool2dDesc d;
  d.n = 128, d.c = c, d.h = d.w = hw, d.kernel = d.stride = 2, d.dtype = dt;
  d.channels_last = true;
  const std::int64_t full = d.n * c * hw * hw, pooled = full / 4;
  const Tensor x = Tensor::randn({full}, 1, dt), dy = Tensor::randn({pooled}, 2, dt);
  Tensor y = Tensor::empty({pooled}, dt), normed = Tensor::empty({full}, dt);
  Tensor dnormed = Tensor::empty({full}, dt), dx = Tensor::empty({full}, dt);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(pooled));
  std::vector<std::int32_t> plane(static_cast<std::size_t>(pooled));
  const auto cs = static_cast<std::size_t>(c);
  std::vector<float> w(cs, 1.0f), b(cs, 0.1f), mean(cs), var(cs), dw(cs), db(cs);
  const k::BatchNormDims dims = k::detail::batch_norm_dims_of(d);
  // Phase 0: forward and backward; 1: the forward alone; 2: its batch statistics alone;
  // 3: the backward alone (the fused op only: where its time goes).
  const std::int64_t phase = state.range(4);
  if (phase == 3) {
    k::cpu::batch_norm_relu_max_pool2d(d, x.data_ptr(), w.data(), b.data(), 1e-5f, true,
                                       mean.data(), var.data(), y.data_ptr(), bytes.data());
  }
  for (auto _ : state) {
    if (fused && phase == 2) {
      k::cpu::batch_norm_training_stats(x.data_ptr(), dt, dims, mean.data(), var.data());
    } else if (fused && phase == 3) {
      k::cpu::batch_norm_relu_max_pool2d_backward(d, x.data_ptr(), y.data_ptr(), bytes.data(),
                                                  dy.data_ptr(), mean.data(), var.data(), 1e-5f,
                                                  w.data(), true, dx.data_ptr(), dw.data(),
                                                  db.data());
    } else if (fused) {
      k::cpu::batch_norm_relu_max_pool2d(d, x.data_ptr(), w.data(), b.data(), 1e-5f, true,
                                         mean.data(), var.data(), y.data_ptr(), bytes.data());
      if (phase == 1) continue;
      k::cpu::batch_norm_relu_max_pool2d_backward(d, x.data_ptr(), y.data_ptr(), bytes.data(),
                                                  dy.data_ptr(), mean.data(), var.data(), 1e-5f,
                                                  w.data(), true, dx.data_ptr(), dw.data(),
                                                  db.data());
    } else {
      k::cpu::batch_norm_forward(x.data_ptr(), dt, dims, w.data(), b.data(), 1e-5f, true,
                                 mean.data(), var.data(), normed.data_ptr(), dt, nullptr, true);
      k::cpu::max_pool2d(d, normed.data_ptr(), y.data_ptr(), plane.data());
      k::cpu::max_pool2d_backward(d, dy.data_ptr(), plane.data(), dnormed.data_ptr());
      k::cpu::batch_norm_backward(x.data_ptr(), dt, dnormed.data_ptr(), dt, dims, mean.data(),
                                  var.data(), 1e-5f, w.data(), true, dx.data_ptr(), dt,
                                  dw.data(), db.data(), normed.data_ptr(), nullptr);
    }
    benchmark::DoNotOptimize(dx.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * (5 * full + 3 * pooled) *
                          static_cast<std::int64_t>(mixprec::size_of(dt)));
  state.SetLabel(std::string(fused ? "batch_norm_relu_max_pool2d " : "batch_norm_relu, max_pool2d ") +
                 mixprec::name(dt) + " channels-last");
}

void shapes(benchmark::internal::Benchmark* bm) {
  for (std::int64_t dt : {0, 1}) {
    bm->Args({dt, 32, 28});
    bm->Args({dt, 64, 14});
  }
  bm->ArgNames({"bf16", "C", "HW"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

void kernel_shapes(benchmark::internal::Benchmark* bm) {
  for (std::int64_t dt : {0, 1}) {
    for (std::int64_t ref : {0, 1}) {
      for (std::int64_t channels_last : {0, 1}) {
        bm->Args({dt, 32, 28, ref, channels_last});
        bm->Args({dt, 64, 14, ref, channels_last});
      }
    }
  }
  bm->ArgNames({"bf16", "C", "HW", "ref", "nhwc"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

// A pre-norm transformer's residual step under bf16 autocast, forward: the f32 residual stream
// plus a bf16 sublayer output, then the layer norm that feeds the next GEMM. fused = 1 runs
// add_layer_norm (one pass); 0 runs add() then layer_norm() (autocast widens the bf16 delta in
// a cast pass, the add writes the sum, the norm reads it back). [rows, cols]: gpt-mini's
// [batch 8 x context 64, width 128] and GPT-2-small's [8 x 1024, 768].
void BM_ResidualLayerNorm(benchmark::State& state) {
  const bool fused = state.range(0) != 0;
  const std::int64_t rows = state.range(1), cols = state.range(2);
  const Tensor x = Tensor::randn({rows, cols}, 1);
  const Tensor delta = Tensor::randn({rows, cols}, 2, DType::bf16);
  const Tensor w = Tensor::ones({cols}), b = Tensor::zeros({cols});
  mixprec::runtime::Autocast region(true, DType::bf16);
  for (auto _ : state) {
    if (fused) {
      const mixprec::ResidualNorm r = mixprec::add_layer_norm(x, delta, 1, w, b);
      benchmark::DoNotOptimize(r.normalized.data_ptr());
    } else {
      const Tensor sum = x + delta;
      const Tensor y = mixprec::layer_norm(sum, 1, w, b);
      benchmark::DoNotOptimize(y.data_ptr());
    }
  }
  state.SetLabel(fused ? "add_layer_norm" : "add then layer_norm");
  // Bytes of the fused pass: x (f32) and delta (bf16) read, sum (f32) and y (bf16) written.
  state.SetBytesProcessed(state.iterations() * rows * cols * 12);
}

BENCHMARK(BM_BatchNormReluPool)
    ->ArgsProduct({{0, 1}, {0, 1}, {32}, {28}, {0}})
    ->ArgsProduct({{0, 1}, {0, 1}, {64}, {14}, {0}})
    ->ArgsProduct({{1}, {1}, {32}, {28}, {1, 2, 3}})
    ->ArgsProduct({{1}, {1}, {64}, {14}, {1, 2, 3}})
    ->ArgNames({"fused", "bf16", "C", "HW", "phase"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_ResidualLayerNorm)
    ->ArgsProduct({{0, 1}, {512}, {128}})
    ->ArgsProduct({{0, 1}, {8192}, {768}})
    ->ArgNames({"fused", "rows", "cols"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_BatchNormKernels)->Apply(kernel_shapes);
BENCHMARK(BM_BatchNormMemcpyFloor)->Apply(shapes);
BENCHMARK(BM_BatchNormOp)->Apply(shapes);
BENCHMARK(BM_BatchNormRelu)
    ->ArgsProduct({{0, 1}, {0, 1}, {32}, {28}})
    ->ArgsProduct({{0, 1}, {0, 1}, {64}, {14}})
    ->ArgNames({"fused", "bf16", "C", "HW"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
