// Causal self-attention alone, forward and forward + backward, through the public op on any
// device: the figure scripts/check-cuda.sh holds against PyTorch's SDPA (bench/peer_sdpa.py) on
// the same shapes. q, k, v are [B, H, T, d] views of [B, T, H, d] memory, as a projection
// leaves them (the GPT models' layout), in bf16 or f16 (the op then rounds P and dS to that
// dtype, the autocast spec) or f32. Each figure is the median of --iters timed calls after
// --warmup untimed ones, each call closed by a device synchronisation. TFLOP/s counts the
// causal products once: forward 4 B H T^2 d / 2, backward 2.5 times that (the five products of
// flash attention's backward; a kernel that recomputes more does more than it is credited).
//
//   attention_step [--device cuda] [--batch 8] [--heads 12] [--context 1024] [--head-size 64]
//                  [--dtype bf16|f16|f32] [--iters 20] [--warmup 3] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "tool_flags.h"
#include "mixprec/core/device.h"
#include "mixprec/core/transfer.h"
#include "mixprec/ops/attention.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/tensor/tensor.h"

namespace {

struct Options {
  std::string device = "cuda", dtype = "bf16";
  long batch = 8, heads = 12, context = 1024, head_size = 64, iters = 20, warmup = 3;
  bool json = false;
};

constexpr mixprec::bench::ToolUsage kUsage{
    "attention_step",
    "attention_step [--device D] [--batch B] [--heads H] [--context T] [--head-size d] "
    "[--dtype bf16|f16|f32] [--iters N] [--warmup N] [--json]"};

Options parse(int argc, char** argv) {
  Options o;
  mixprec::bench::parse_flags(argc, argv, kUsage, {{"--device", &o.device}, {"--dtype", &o.dtype}},
                              {{"--batch", &o.batch}, {"--heads", &o.heads},
                               {"--context", &o.context}, {"--head-size", &o.head_size},
                               {"--iters", &o.iters}, {"--warmup", &o.warmup, true}},
                              &o.json);
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  using mixprec::Tensor;
  const Options o = parse(argc, argv);
  mixprec::set_device(o.device);
  const mixprec::Device device = mixprec::parse_device(o.device);
  const mixprec::DType dtype = o.dtype == "bf16"  ? mixprec::DType::bf16
                               : o.dtype == "f16" ? mixprec::DType::f16
                               : o.dtype == "f32" ? mixprec::DType::f32
                                                  : (kUsage.fail("--dtype must be bf16, f16 or f32"), mixprec::DType::f32);
  const long b = o.batch, h = o.heads, t = o.context, d = o.head_size;
  // Leaves in the projection's memory order; the op sees their [B, H, T, d] views.
  Tensor q = Tensor::randn({b, t, h, d}, 1, dtype), k = Tensor::randn({b, t, h, d}, 2, dtype),
         v = Tensor::randn({b, t, h, d}, 3, dtype);
  q.set_requires_grad();
  k.set_requires_grad();
  v.set_requires_grad();
  const auto heads = [](const Tensor& x) { return x.permute({0, 2, 1, 3}); };
  const Tensor dout = heads(Tensor::randn({b, t, h, d}, 4, dtype));  // in the output's layout
  const auto time_ms = [&](bool backward) {
    const auto t0 = std::chrono::steady_clock::now();
    Tensor out = mixprec::scaled_dot_product_attention(heads(q), heads(k), heads(v), {}, 0.0f, true);
    if (backward) out.backward(dout);
    mixprec::synchronize(device);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> fwd, both;
  for (long i = 0; i < o.warmup; ++i) time_ms(true);
  for (long i = 0; i < o.iters; ++i) fwd.push_back(time_ms(false));
  for (long i = 0; i < o.iters; ++i) both.push_back(time_ms(true));
  const double f = mixprec::bench::median(fwd), fb = mixprec::bench::median(both), bwd = fb - f;
  const double fwd_flops = 4.0 * b * h * static_cast<double>(t) * t * d / 2.0;
  const double tf_fwd = fwd_flops / (f * 1e-3) / 1e12, tf_bwd = 2.5 * fwd_flops / (bwd * 1e-3) / 1e12;
  if (o.json) {
    std::printf("{\"impl\": \"mixprec\", \"device\": \"%s\", \"dtype\": \"%s\", \"batch\": %ld, "
                "\"heads\": %ld, \"context\": %ld, \"head_size\": %ld, \"forward_ms\": %.4f, "
                "\"forward_backward_ms\": %.4f, \"backward_ms\": %.4f, \"forward_tflops\": %.1f, "
                "\"backward_tflops\": %.1f}\n",
                o.device.c_str(), o.dtype.c_str(), b, h, t, d, f, fb, bwd, tf_fwd, tf_bwd);
  } else {
    std::printf("mixprec attention on %s, %s, B %ld H %ld T %ld d %ld, causal: forward %.3f ms "
                "(%.1f TFLOP/s), forward+backward %.3f ms, backward %.3f ms (%.1f TFLOP/s)\n",
                o.device.c_str(), o.dtype.c_str(), b, h, t, d, f, tf_fwd, fb, bwd, tf_bwd);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "attention_step: %s\n", e.what());
  return 1;
}
