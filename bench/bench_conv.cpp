// kernels::conv2d* at the Fashion-MNIST CNN's shapes (N=128, 3x3 pad 1: 1->32 at 28x28 and
// 32->64 at 14x14), forward, backward data and backward weights, for every route and layout:
// f32 (plain NCHW and blocked), bf16 native (oneDNN's bf16 kernels) and bf16 widened to f32,
// f16 (always widened), and channels-last (nhwc) activations; plus the pooling kernels at the
// CNN's sizes, NCHW and channels-last.
// Run: OMP_NUM_THREADS=2 bench_conv --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "mixprec/core/half.h"

namespace {

using mixprec::DType;
namespace k = mixprec::kernels;

struct Layer {
  const char* name;
  std::int64_t c, o, hw;
};
const Layer kLayers[] = {{"L1_1to32_28", 1, 32, 28}, {"L2_32to64_14", 32, 64, 14}};

enum class Pass { fwd, bwd_data, bwd_weights };

struct Variant {
  const char* name;
  DType dtype;
  k::ConvBf16Route route;
  k::ConvLayout layout;
  bool direct;  // the direct few-channel kernel where it covers the pass (the library default)
  bool channels_last = false;  // NHWC activations (--memory-format channels-last)
};
// "auto" is what the library does by default (the direct kernel for the first layer's forward
// and weight gradient; otherwise oneDNN, layout per pass and shape, bf16 widened unless the CPU
// has avx512_bf16); the others force oneDNN with one layout or route to compare against.
const Variant kVariants[] = {
    {"f32_auto", DType::f32, k::ConvBf16Route::automatic, k::ConvLayout::automatic, true},
    {"f32_plain", DType::f32, k::ConvBf16Route::automatic, k::ConvLayout::plain, false},
    {"f32_blocked", DType::f32, k::ConvBf16Route::automatic, k::ConvLayout::blocked, false},
    {"bf16_auto", DType::bf16, k::ConvBf16Route::automatic, k::ConvLayout::automatic, true},
    {"bf16_native_auto", DType::bf16, k::ConvBf16Route::native, k::ConvLayout::automatic, false},
    {"bf16_native_plain", DType::bf16, k::ConvBf16Route::native, k::ConvLayout::plain, false},
    {"bf16_widened_auto", DType::bf16, k::ConvBf16Route::widen, k::ConvLayout::automatic, false},
    {"f16_auto", DType::f16, k::ConvBf16Route::automatic, k::ConvLayout::automatic, true},
    {"f32_nhwc_auto", DType::f32, k::ConvBf16Route::automatic, k::ConvLayout::automatic, true, true},
    {"f32_nhwc_blocked", DType::f32, k::ConvBf16Route::automatic, k::ConvLayout::blocked, true, true},
    {"bf16_nhwc_auto", DType::bf16, k::ConvBf16Route::automatic, k::ConvLayout::automatic, true, true},
    {"bf16_nhwc_plain", DType::bf16, k::ConvBf16Route::automatic, k::ConvLayout::plain, false, true},
    {"bf16_nhwc_blocked", DType::bf16, k::ConvBf16Route::automatic, k::ConvLayout::blocked, false, true},
};

std::vector<std::byte> fill(std::size_t n, DType t, std::uint32_t seed) {
  std::vector<std::byte> v(n * mixprec::size_of(t));
  std::uint32_t x = seed * 2654435761u;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const float f = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 0.5f;
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

void run_conv(benchmark::State& state, Layer layer, Variant var, Pass pass) {
  k::Conv2dDesc d;
  d.n = 128, d.c = layer.c, d.h = layer.hw, d.w = layer.hw, d.o = layer.o, d.kh = 3, d.kw = 3;
  d.stride = 1, d.padding = 1;
  d.dtype = var.dtype;
  d.has_bias = pass != Pass::bwd_data;
  d.bias_dtype = DType::f32;
  d.channels_last = var.channels_last;
  const auto nx = static_cast<std::size_t>(d.n * d.c * d.h * d.w);
  const auto nw = static_cast<std::size_t>(d.o * d.c * 9);
  const auto ny = static_cast<std::size_t>(d.n * d.o * d.out_h() * d.out_w());
  std::vector<std::byte> x = fill(nx, d.dtype, 1), w = fill(nw, d.dtype, 2);
  std::vector<std::byte> y = fill(ny, d.dtype, 3), b = fill(static_cast<std::size_t>(d.o), DType::f32, 4);
  const auto prev_route = k::set_conv_bf16_route(var.route);
  const auto prev_layout = k::set_conv_layout(var.layout);
  const bool prev_direct = k::set_conv_direct(var.direct);
  for (auto _ : state) {
    switch (pass) {
      case Pass::fwd: k::conv2d(d, x.data(), w.data(), b.data(), y.data()); break;
      case Pass::bwd_data: k::conv2d_backward_data(d, y.data(), w.data(), x.data()); break;
      case Pass::bwd_weights:
        k::conv2d_backward_weights(d, x.data(), y.data(), w.data(), b.data());
        break;
    }
    benchmark::ClobberMemory();
  }
  k::set_conv_bf16_route(prev_route);
  k::set_conv_layout(prev_layout);
  k::set_conv_direct(prev_direct);
  const double flops = 2.0 * static_cast<double>(ny) * static_cast<double>(d.c * 9);
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Pooling at the CNN's first pooling layer, through kernels::cpu (Highway) or kernels::ref
// (scalar spec). Bytes moved once: forward reads x and writes y and argmax (avg: no argmax);
// backward reads dy (and argmax) and writes dx. A memcpy moving the same bytes is the floor.
std::int64_t pool_bytes(const k::Pool2dDesc& d, bool max) {
  const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.out_h() * d.out_w();
  return (nx + ny) * static_cast<std::int64_t>(mixprec::size_of(d.dtype)) + (max ? ny * 4 : 0);
}

k::Pool2dDesc pool_desc(DType t, bool channels_last = false) {
  k::Pool2dDesc d;
  d.n = 128, d.c = 32, d.h = 28, d.w = 28, d.kernel = 2, d.stride = 2, d.dtype = t;
  d.channels_last = channels_last;
  return d;
}

void run_pool(benchmark::State& state, bool max, bool backward, DType t, bool ref,
              bool channels_last) {
  const k::Pool2dDesc d = pool_desc(t, channels_last);
  const auto nx = static_cast<std::size_t>(d.n * d.c * d.h * d.w);
  const auto ny = static_cast<std::size_t>(d.n * d.c * d.out_h() * d.out_w());
  std::vector<std::byte> x = fill(nx, t, 5), y = fill(ny, t, 6);
  std::vector<std::int32_t> am(ny);
  k::ref::max_pool2d(d, x.data(), y.data(), am.data());
  for (auto _ : state) {
    if (ref) {
      if (max && !backward) k::ref::max_pool2d(d, x.data(), y.data(), am.data());
      if (max && backward) k::ref::max_pool2d_backward(d, y.data(), am.data(), x.data());
      if (!max && !backward) k::ref::avg_pool2d(d, x.data(), y.data());
      if (!max && backward) k::ref::avg_pool2d_backward(d, y.data(), x.data());
    } else {
      if (max && !backward) k::cpu::max_pool2d(d, x.data(), y.data(), am.data());
      if (max && backward) k::cpu::max_pool2d_backward(d, y.data(), am.data(), x.data());
      if (!max && !backward) k::cpu::avg_pool2d(d, x.data(), y.data());
      if (!max && backward) k::cpu::avg_pool2d_backward(d, y.data(), x.data());
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * pool_bytes(d, max));
}

// The floor: memcpy of half the bytes a pooling pass moves (a copy reads and writes each byte).
void run_pool_memcpy(benchmark::State& state, bool max, DType t) {
  const std::int64_t bytes = pool_bytes(pool_desc(t), max);
  std::vector<std::byte> src(static_cast<std::size_t>(bytes / 2), std::byte{1}), dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

const int kRegistered = [] {
  const std::pair<Pass, const char*> passes[] = {
      {Pass::fwd, "fwd"}, {Pass::bwd_data, "bwd_data"}, {Pass::bwd_weights, "bwd_weights"}};
  for (const Layer& l : kLayers) {
    for (const auto& [pass, pname] : passes) {
      for (const Variant& v : kVariants) {
        const std::string name = std::string("conv/") + l.name + "/" + pname + "/" + v.name;
        benchmark::RegisterBenchmark(name.c_str(), run_conv, l, v, pass)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  for (DType t : {DType::f32, DType::bf16}) {
    for (bool max : {true, false}) {
      for (bool bwd : {false, true}) {
        const std::string name = std::string("pool/128x32x28x28/") + (max ? "max" : "avg") +
                                 (bwd ? "_bwd/" : "_fwd/") + mixprec::name(t);
        for (bool ref : {false, true}) {
          benchmark::RegisterBenchmark((name + (ref ? "/ref" : "/cpu")).c_str(), run_pool, max, bwd, t, ref, false)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
        benchmark::RegisterBenchmark((name + "/cpu_nhwc").c_str(), run_pool, max, bwd, t, false, true)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
      benchmark::RegisterBenchmark((std::string("pool/128x32x28x28/") + (max ? "max" : "avg") +
                                    "_memcpy_floor/" + mixprec::name(t)).c_str(),
                                   run_pool_memcpy, max, t)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
