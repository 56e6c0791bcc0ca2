// kernels::matmul at the seed MLP's shapes (1024 -> 4096 -> 4096 -> 10, batch 256, weights
// stored [out, in]) in f32, bf16 and f16, plus one training step's 8 GEMMs back to back.
// Run: bench_matmul --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/half.h"

namespace {

using mixprec::DType;
using mixprec::kernels::MatmulBf16Route;
using mixprec::kernels::MatmulDesc;
using mixprec::kernels::MatmulPostOp;

struct Gemm {
  const char* name;
  std::int64_t m, n, k;
  bool trans_a, trans_b;
  bool bias_relu;  // forward layers 1-2: bias + relu epilogue; layer 3 has bias only
  bool bias;
  bool in_step;  // part of a training step (layer 1 needs no dX)
};

constexpr std::int64_t kBatch = 256;
// Y = X W^T (forward), dX = dY W, dW = dY^T X for W1 [4096,1024], W2 [4096,4096], W3 [10,4096].
const Gemm kGemms[] = {
    {"fwd1", kBatch, 4096, 1024, false, true, true, true, true},
    {"fwd2", kBatch, 4096, 4096, false, true, true, true, true},
    {"fwd3", kBatch, 10, 4096, false, true, false, true, true},
    {"dX1", kBatch, 1024, 4096, false, false, false, false, false},
    {"dX2", kBatch, 4096, 4096, false, false, false, false, true},
    {"dX3", kBatch, 4096, 10, false, false, false, false, true},
    {"dW1", 4096, 1024, kBatch, true, false, false, false, true},
    {"dW2", 4096, 4096, kBatch, true, false, false, false, true},
    {"dW3", 10, 4096, kBatch, true, false, false, false, true},
};

// Operands of one GEMM, filled with small values so nothing overflows in f16.
struct Operands {
  MatmulDesc desc;
  std::vector<std::byte> a, b, bias, c;

  Operands(const Gemm& g, DType t) {
    desc.m = g.m, desc.n = g.n, desc.k = g.k;
    desc.trans_a = g.trans_a, desc.trans_b = g.trans_b;
    desc.dtype = t, desc.c_dtype = t, desc.bias_dtype = t;
    desc.has_bias = g.bias;
    desc.post_op = g.bias_relu ? MatmulPostOp::relu : MatmulPostOp::none;
    a = fill(static_cast<std::size_t>(g.m * g.k), t, 1);
    b = fill(static_cast<std::size_t>(g.k * g.n), t, 2);
    bias = fill(static_cast<std::size_t>(g.n), t, 3);
    c = fill(static_cast<std::size_t>(g.m * g.n), t, 4);
  }
  void run() { mixprec::kernels::matmul(desc, a.data(), b.data(), bias.data(), c.data()); }

  static std::vector<std::byte> fill(std::size_t n, DType t, std::uint32_t seed) {
    std::vector<std::byte> v(n * mixprec::size_of(t));
    std::uint32_t x = seed * 2654435761u;
    for (std::size_t i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      const float f = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 0.0625f;
      if (t == DType::f32) {
        std::memcpy(v.data() + 4 * i, &f, 4);
      } else {
        const std::uint16_t bits =
            t == DType::bf16 ? mixprec::f32_to_bf16_bits(f) : mixprec::f32_to_f16_bits(f);
        std::memcpy(v.data() + 2 * i, &bits, 2);
      }
    }
    return v;
  }
};

double flops(const Gemm& g) { return 2.0 * static_cast<double>(g.m * g.n * g.k); }

// A dtype and the bf16 route to run it with ("bf16" is the automatic choice for this CPU).
struct Variant {
  const char* name;
  DType dtype;
  MatmulBf16Route route;
};
const Variant kVariants[] = {{"f32", DType::f32, MatmulBf16Route::automatic},
                             {"bf16", DType::bf16, MatmulBf16Route::automatic},
                             {"bf16_native", DType::bf16, MatmulBf16Route::native},
                             {"bf16_widen", DType::bf16, MatmulBf16Route::widen},
                             {"f16", DType::f16, MatmulBf16Route::automatic}};

// Sets the bf16 route for one benchmark run.
class Route {
 public:
  explicit Route(MatmulBf16Route r) : previous_(mixprec::kernels::set_matmul_bf16_route(r)) {}
  ~Route() { mixprec::kernels::set_matmul_bf16_route(previous_); }
  Route(const Route&) = delete;
  Route& operator=(const Route&) = delete;

 private:
  MatmulBf16Route previous_;
};

void bm_gemm(benchmark::State& state, const Gemm& g, const Variant& v) {
  const Route route(v.route);
  Operands ops(g, v.dtype);
  ops.run();  // warm-up: primitive creation and workspace growth happen here
  for (auto _ : state) {
    ops.run();
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops(g) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The 8 GEMMs of one training step (3 forward, dX of layers 2-3, 3 dW), back to back.
void bm_step(benchmark::State& state, const Variant& v) {
  const Route route(v.route);
  const DType t = v.dtype;
  std::vector<Operands> all;
  double total = 0;
  for (const Gemm& g : kGemms) {
    if (!g.in_step) continue;
    all.emplace_back(g, t);
    all.back().run();
    total += flops(g);
  }
  for (auto _ : state) {
    for (Operands& o : all) o.run();
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(total * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_flags", mixprec::cpu_features().to_string());
  for (const Variant& v : kVariants) {
    for (const Gemm& g : kGemms) {
      const std::string name = std::string("matmul/") + v.name + "/" + g.name + "/" +
                               std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
                               std::to_string(g.k);
      // oneDNN runs on several threads: time the wall clock, not this thread's CPU time.
      benchmark::RegisterBenchmark(name.c_str(), bm_gemm, g, v)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark((std::string("matmul_step8/") + v.name).c_str(), bm_step, v)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
