// Causal attention, forward and backward, at the shapes the GPT steps meet: gpt-mini (batch 16,
// 4 heads of 32, context 128) and the bigger GPT of bench/compare_gpt.sh (batch 4, 8 heads of 64,
// context 512), with q, k, v, out read and written where the projections put them ([B, T, H, d]
// through AttentionLayout), in f32, bf16 and bf16 with round_probs, on the active backend at
// the best ISA this CPU allows (bf16=2 is bf16 with round_probs). GFLOP/s counts the full (uncausal) products, 4 B H T^2 d forward and 8 B H T^2 d
// backward, as `mixprec profile` does, so figures compare with the GEMM peak directly. Times
// are wall-clock (UseRealTime): the kernels run on the library's threads.
// Run: bench_attention --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "bench_values.h"
#include "kernels/attention.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/half.h"

namespace {

using mixprec::DType;
namespace k = mixprec::kernels;

using mixprec::bench::values;

/// One causal self-attention call over [B, T, H, d] operands (each its own buffer).
struct Call {
  k::AttentionDesc desc;
  std::vector<std::uint8_t> q, k, v, out, dout, dq, dk, dv;
  std::vector<float> lse;

  Call(std::int64_t batch, std::int64_t heads, std::int64_t t, std::int64_t d, DType dtype) {
    desc.bh = batch * heads;
    desc.heads = heads;
    desc.tq = desc.tk = t;
    desc.d = desc.dv = d;
    desc.dtype = dtype;
    desc.scale = 1.0f / 8.0f;
    desc.causal = true;
    const k::AttentionLayout rows{t * heads * d, d, heads * d};
    desc.q_rows = desc.k_rows = desc.v_rows = desc.out_rows = rows;
    const std::int64_t n = batch * t * heads * d;
    q = values(dtype, n, -1.0f, 1.0f, 1);
    k = values(dtype, n, -1.0f, 1.0f, 2);
    v = values(dtype, n, -1.0f, 1.0f, 3);
    dout = values(dtype, n, -1.0f, 1.0f, 4);
    out = dq = dk = dv = std::vector<std::uint8_t>(q.size());
    lse.resize(static_cast<std::size_t>(desc.bh * t));
  }
  void forward() {
    k::attention_forward(desc, q.data(), k.data(), v.data(), out.data(), lse.data());
  }
  void backward() {
    k::attention_backward(desc, q.data(), k.data(), v.data(), out.data(), lse.data(), dout.data(),
                          dq.data(), dk.data(), dv.data());
  }
  double flops(bool backward) const {
    return (backward ? 8.0 : 4.0) * static_cast<double>(desc.bh) * static_cast<double>(desc.tq) *
           static_cast<double>(desc.tk) * static_cast<double>(desc.d);
  }
};

DType dtype_arg(std::int64_t a) { return a == 0 ? DType::f32 : DType::bf16; }

void BM_Attention(benchmark::State& state, bool backward) {
  Call call(state.range(0), state.range(1), state.range(2), state.range(3),
            dtype_arg(state.range(4)));
  // bf16=2: bf16 with round_probs, what the op runs under bf16 autocast by default (P and dS
  // rounded to bf16 before their products); bf16=1 keeps them f32 (attention precision highest).
  call.desc.round_probs = state.range(4) == 2;
  call.forward();
  for (auto _ : state) {
    if (backward) {
      call.backward();
    } else {
      call.forward();
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(mixprec::name(mixprec::max_isa()));
  state.counters["GFLOP/s"] = benchmark::Counter(call.flops(backward) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"B", "H", "T", "d", "bf16"});
  for (std::int64_t t : {0, 1, 2}) {
    b->Args({16, 4, 128, 32, t});  // gpt-mini
    b->Args({4, 8, 512, 64, t});   // the bigger GPT
  }
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_Attention, forward, false)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_Attention, backward, true)->Apply(Shapes);

}  // namespace

BENCHMARK_MAIN();
