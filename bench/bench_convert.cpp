// Bulk dtype conversions on 4M elements: the cpu backend (Highway, best target of this CPU, all
// threads) against the ref backend (scalar loops, one thread) and against a memcpy that moves
// the same number of bytes (the bandwidth floor: a conversion cannot beat a copy of its traffic).
// Bytes/s counts bytes read plus bytes written, so the three rows of a conversion compare
// directly. Rows: <conversion>/cpu, <conversion>/ref, <conversion>/memcpy_floor.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/random.h"
#include "mixprec/kernels/random_arrays.h"

namespace mixprec {
namespace {

constexpr std::size_t kN = std::size_t{1} << 22;

enum class Kind { rne, stochastic, random_bits };

struct Case {
  const char* name;
  Kind kind;
  DType src;
  DType dst;
};

constexpr Case kCases[] = {
    {"f32_to_bf16", Kind::rne, DType::f32, DType::bf16},
    {"bf16_to_f32", Kind::rne, DType::bf16, DType::f32},
    {"f32_to_f16", Kind::rne, DType::f32, DType::f16},
    {"f16_to_f32", Kind::rne, DType::f16, DType::f32},
    {"bf16_to_f16", Kind::rne, DType::bf16, DType::f16},
    {"f32_to_f8e4m3", Kind::rne, DType::f32, DType::f8e4m3},
    {"f8e4m3_to_f32", Kind::rne, DType::f8e4m3, DType::f32},
    {"f32_to_bf16_stochastic", Kind::stochastic, DType::f32, DType::bf16},
    {"f32_to_f16_stochastic", Kind::stochastic, DType::f32, DType::f16},
    // 4 bytes written per element, nothing read; "ref" is the scalar random_bits() loop.
    {"fill_random_bits", Kind::random_bits, DType::f32, DType::f32},
};

std::size_t bytes_per_element(const Case& c) {
  return c.kind == Kind::random_bits ? 4 : size_of(c.src) + size_of(c.dst);
}

/// kN elements of dtype t holding values of a realistic spread (activations, gradients).
std::vector<std::uint8_t> make_input(DType t) {
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> f(kN);
  for (float& x : f) x = normal(gen);
  std::vector<std::uint8_t> out(kN * size_of(t));
  convert(f.data(), DType::f32, out.data(), t, kN);
  return out;
}

void finish(benchmark::State& state, const Case& c) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(kN * bytes_per_element(c)));
}

void run_conversion(benchmark::State& state, const Case& c, const char* backend) {
  const std::string before = kernels::set_backend(backend);
  const std::vector<std::uint8_t> src = make_input(c.src);
  std::vector<std::uint8_t> dst(kN * size_of(c.dst));
  const auto* f = reinterpret_cast<const float*>(src.data());
  const bool ref = std::string(backend) == "ref";
  std::uint64_t step = 0;
  for (auto _ : state) {
    switch (c.kind) {
      case Kind::rne:
        convert(src.data(), c.src, dst.data(), c.dst, kN);
        break;
      case Kind::stochastic:
        if (c.dst == DType::bf16) {
          convert_f32_to_bf16_stochastic(f, reinterpret_cast<bfloat16*>(dst.data()), kN, 42,
                                         kN * step++);
        } else {
          convert_f32_to_f16_stochastic(f, reinterpret_cast<float16*>(dst.data()), kN, 42,
                                        kN * step++);
        }
        break;
      case Kind::random_bits: {
        auto* out = reinterpret_cast<std::uint32_t*>(dst.data());
        const std::uint64_t offset = kN * step++;
        if (ref) {
          for (std::size_t i = 0; i < kN; ++i) out[i] = random_bits(42, offset + i);
        } else {
          fill_random_bits(42, offset, out, kN);
        }
        break;
      }
    }
    benchmark::ClobberMemory();
  }
  kernels::set_backend(before);
  state.SetLabel(ref ? "ref" : simd_target());
  finish(state, c);
}

/// A memcpy of half the conversion's traffic: it reads and writes as many bytes in total.
void run_memcpy(benchmark::State& state, const Case& c) {
  const std::size_t bytes = kN * bytes_per_element(c) / 2;
  std::vector<std::uint8_t> a(bytes, 1), b(bytes, 2);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetLabel("floor");
  finish(state, c);
}

void register_all() {
  for (const Case& c : kCases) {
    // Wall-clock rates: the cpu backend runs on OpenMP threads.
    benchmark::RegisterBenchmark((std::string(c.name) + "/cpu").c_str(),
                                 [c](benchmark::State& s) { run_conversion(s, c, "cpu"); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string(c.name) + "/ref").c_str(),
                                 [c](benchmark::State& s) { run_conversion(s, c, "ref"); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string(c.name) + "/memcpy_floor").c_str(),
                                 [c](benchmark::State& s) { run_memcpy(s, c); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace mixprec

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  mixprec::register_all();
  benchmark::AddCustomContext("cpu_flags", mixprec::cpu_features().to_string());
  benchmark::AddCustomContext("simd_target", mixprec::simd_target());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
