// The GEMM rate of the fp8 recipes against bf16 on any device: kernels::fp8_gemm (E4M3 x E4M3,
// bf16 C, with and without fast accumulation) beside kernels::matmul in bf16 on the same
// problem, C [m, n] = A [m, k] B [n, k]ᵀ (the Linear's forward layout, the one fp8 Tensor Cores
// read). What scripts/check-cuda.sh holds against PyTorch's torch._scaled_mm and bf16 mm
// (bench/peer_scaled_mm.py) at 8192³ and GPT-2-small's shapes. Each figure is the median of
// --iters timed calls after --warmup untimed ones, each call closed by a device
// synchronisation; TFLOP/s counts 2 m n k.
//
//   gemm_rate [--device cuda] [--m 8192] [--n 8192] [--k 8192] [--iters 20] [--warmup 3] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "tool_flags.h"
#include "kernels/fp8_gemm.h"
#include "kernels/matmul.h"
#include "mixprec/core/device.h"
#include "mixprec/core/transfer.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/tensor/tensor.h"

namespace {

struct Options {
  std::string device = "cuda";
  long m = 8192, n = 8192, k = 8192, iters = 20, warmup = 3;
  bool json = false;
};

constexpr mixprec::bench::ToolUsage kUsage{
    "gemm_rate", "gemm_rate [--device D] [--m M] [--n N] [--k K] [--iters N] [--warmup N] [--json]"};

Options parse(int argc, char** argv) {
  Options o;
  mixprec::bench::parse_flags(argc, argv, kUsage, {{"--device", &o.device}},
                              {{"--m", &o.m}, {"--n", &o.n}, {"--k", &o.k}, {"--iters", &o.iters},
                               {"--warmup", &o.warmup, true}},
                              &o.json);
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  using mixprec::DType;
  using mixprec::Tensor;
  const Options o = parse(argc, argv);
  mixprec::set_device(o.device);
  const mixprec::Device device = mixprec::parse_device(o.device);
  // Operands of unit scale: randn values are well inside E4M3's range, so the casts are plain.
  const Tensor a16 = Tensor::randn({o.m, o.k}, 1, DType::bf16);
  const Tensor b16 = Tensor::randn({o.n, o.k}, 2, DType::bf16);
  const Tensor a8 = a16.to(DType::f8e4m3), b8 = b16.to(DType::f8e4m3);
  const Tensor scales = Tensor::full({2}, 1.0f);
  Tensor c = Tensor::empty({o.m, o.n}, DType::bf16);

  mixprec::kernels::MatmulDesc bf16;
  bf16.m = o.m, bf16.n = o.n, bf16.k = o.k, bf16.trans_b = true;
  bf16.dtype = DType::bf16, bf16.c_dtype = DType::bf16;
  mixprec::kernels::Fp8GemmDesc fp8;
  fp8.m = o.m, fp8.n = o.n, fp8.k = o.k;
  fp8.a_dtype = fp8.b_dtype = DType::f8e4m3, fp8.c_dtype = DType::bf16;
  const float* s = scales.data<float>();

  struct Run {
    const char* name;
    std::function<void()> call;
  };
  const Run runs[] = {
      {"bf16", [&] { mixprec::kernels::matmul(bf16, a16.data_ptr(), b16.data_ptr(), nullptr, c.data_ptr()); }},
      {"fp8", [&] {
         fp8.fast_accum = false;
         mixprec::kernels::fp8_gemm(fp8, a8.data_ptr(), s, b8.data_ptr(), s + 1, nullptr, c.data_ptr());
       }},
      {"fp8-fast-accum", [&] {
         fp8.fast_accum = true;
         mixprec::kernels::fp8_gemm(fp8, a8.data_ptr(), s, b8.data_ptr(), s + 1, nullptr, c.data_ptr());
       }},
  };
  const double flops = 2.0 * static_cast<double>(o.m) * static_cast<double>(o.n) * static_cast<double>(o.k);
  for (const Run& r : runs) {
    const auto time_ms = [&] {
      const auto t0 = std::chrono::steady_clock::now();
      r.call();
      mixprec::synchronize(device);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    for (long i = 0; i < o.warmup; ++i) time_ms();
    std::vector<double> times;
    for (long i = 0; i < o.iters; ++i) times.push_back(time_ms());
    const double ms = mixprec::bench::median(times), tflops = flops / (ms * 1e-3) / 1e12;
    if (o.json) {
      std::printf("{\"impl\": \"mixprec\", \"device\": \"%s\", \"gemm\": \"%s\", \"m\": %ld, "
                  "\"n\": %ld, \"k\": %ld, \"ms\": %.4f, \"tflops\": %.2f}\n",
                  o.device.c_str(), r.name, o.m, o.n, o.k, ms, tflops);
    } else {
      std::printf("mixprec %s GEMM on %s, %ldx%ldx%ld: %.3f ms (%.2f TFLOP/s)\n", r.name,
                  o.device.c_str(), o.m, o.n, o.k, ms, tflops);
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gemm_rate: %s\n", e.what());
  return 1;
}
