// kernels::conv2d*: validates, handles empty extents, picks the route and the layout, and turns
// every dtype into a convolution oneDNN runs directly. f16: oneDNN 2.6 has no f16 convolution on
// CPU, so f16 operands are widened to f32 (exact; products of two f16 are exact in f32), oneDNN
// accumulates in f32 and each output is rounded once to f16, as a GPU's f16 convolution with
// f32 accumulation would. bf16 takes the same widened route unless the CPU has native bf16 dot
// products or the convolution is memory-bound (ConvBf16Route), because oneDNN only emulates
// bf16 on AVX-512F (see bench_conv).
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/conv.h"
#include "kernels/convert.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/growing_buffer.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels {
namespace {

using cpu::ConvBuffers;
using cpu::ConvPass;

// MIXPREC_CONV: "ref" forces the reference kernels, "onednn" keeps first layers off the direct
// kernel; read once (a typo throws on every call).
std::string_view conv_env() {
  static const std::string_view value = [] {
    const char* v = std::getenv("MIXPREC_CONV");
    return v == nullptr ? std::string_view() : std::string_view(v);
  }();
  MIXPREC_CHECK(value.empty() || value == "ref" || value == "onednn", ValueError, "conv2d",
                "MIXPREC_CONV must be 'ref' or 'onednn', got '" << value << "'");
  return value;
}

bool force_reference() { return conv_env() == "ref"; }

std::atomic<bool>& direct_enabled() {
  static std::atomic<bool> enabled{conv_env() != "onednn"};
  return enabled;
}

std::atomic<ConvBf16Route>& bf16_route() {
  static std::atomic<ConvBf16Route> route{ConvBf16Route::automatic};
  return route;
}
std::atomic<ConvLayout>& layout() {
  static std::atomic<ConvLayout> l{ConvLayout::automatic};
  return l;
}

// Input channels below which a convolution is memory-bound at the CNN's sizes (the 1->32 first
// layer): there oneDNN's bf16 kernels, even emulated on AVX-512F, beat widening, whose
// conversions of the inputs and the output cost more than the arithmetic (bench_conv, N=128:
// 1->32 forward 16 vs 29 ms, backward weights 22 vs 65 ms). With more channels the emulated
// kernels lose (32->64: 109 vs 76 ms forward, 129 vs 88 ms backward weights).
constexpr std::int64_t kFewChannels = 16;

bool bf16_native(const Conv2dDesc& d) {
  switch (bf16_route().load(std::memory_order_relaxed)) {
    case ConvBf16Route::native: return true;
    case ConvBf16Route::widen: return false;
    case ConvBf16Route::automatic: break;
  }
  return isa_allowed(Isa::avx512_bf16) || d.c < kFewChannels;
}

std::string bf16_skip_reason(bool tried_native, const cpu::ConvOnednnInfo& info) {
  if (tried_native) return info.impl + " is reference-only or missing";
  if (bf16_route().load(std::memory_order_relaxed) == ConvBf16Route::widen) {
    return "route forced to widen by set_conv_bf16_route()";
  }
  if (!cpu_features().avx512_bf16) {
    return "CPU lacks avx512_bf16 (oneDNN would emulate it, slower than widening to f32 with "
           ">= 16 input channels)";
  }
  return std::string("capped at ") + name(max_isa()) + " by MIXPREC_ISA or set_max_isa()";
}

// Whether oneDNN computes in its own blocked layouts (with reorders around the call) or on the
// NCHW buffers directly. Measured with bench_conv (N=128 CNN shapes): with few input channels
// (the 1->32 first layer) the blocked layouts pad C to 16 and the reorders cost more than the
// convolution, so forward and backward-data run plain there (~2.5x and ~4x faster); backward
// weights always run blocked (plain has no JIT kernel for C=1: oneDNN's reference loop, 50x
// slower) and so does everything with >= 16 channels (blocked is equal or up to 1.3x faster).
// Channels-last activations run plain where oneDNN has a JIT kernel reading nhwc directly (no
// reorders; with the weights in its own layout it has one for bf16 and f32, AVX2 included),
// else blocked with reorders from and to nhwc. Keeping the activations in nhwc is what makes
// channels-last the faster layout for a convnet's step: the reorders of blocked mode cost
// ~1 ms of the CNN's 9 ms bf16 step (ONEDNN_VERBOSE). `runs` is the descriptor oneDNN will
// see (bf16 widened to f32 or not).
bool use_blocked(ConvPass pass, const Conv2dDesc& d, const Conv2dDesc& runs) {
  switch (layout().load(std::memory_order_relaxed)) {
    case ConvLayout::plain: return false;
    case ConvLayout::blocked: return true;
    case ConvLayout::automatic: break;
  }
  if (d.channels_last) {
    // f32 weight gradients of a few-channel layer: the nhwc JIT kernel is ~4.5x slower than
    // blocked with its reorders (bench_conv L1 f32: 2.2 vs 0.47 ms; bf16 is the other way).
    if (pass == ConvPass::backward_weights && runs.dtype == DType::f32 && d.c < kFewChannels) return true;
    return cpu::onednn_conv_impl(pass, runs, false).starts_with("onednn:ref");
  }
  return pass == ConvPass::backward_weights || d.c >= 16;
}

using Buffer = cpu::GrowingBuffer;

struct Workspace {
  Buffer x, weight, bias, dy, out, dbias;
};

struct Sizes {
  std::size_t x, weight, y, bias;
  explicit Sizes(const Conv2dDesc& d)
      : x(static_cast<std::size_t>(d.n * d.c * d.h * d.w)),
        weight(static_cast<std::size_t>(d.o * d.c * d.kh * d.kw)),
        y(static_cast<std::size_t>(d.n * d.o * d.out_h() * d.out_w())),
        bias(static_cast<std::size_t>(d.o)) {}
};

const char* op_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward: return "conv2d";
    case ConvPass::backward_data: return "conv2d_backward_data";
    case ConvPass::backward_weights: return "conv2d_backward_weights";
  }
  return "conv2d";
}

const float* widen(const void* src, DType t, Buffer& buf, std::size_t n) {
  if (src == nullptr || t == DType::f32) return static_cast<const float*>(src);
  float* dst = buf.get(n);
  cpu::convert(src, t, dst, DType::f32, n);
  return dst;
}

// Rewrites a pass for oneDNN's f32 kernels: 16-bit inputs become exact f32 copies and 16-bit
// outputs land in f32 workspaces, rounded once into the caller's buffers by finish_widened().
ConvBuffers widen_pass(ConvPass pass, const Conv2dDesc& d, const ConvBuffers& b, Workspace& ws) {
  const Sizes s(d);
  ConvBuffers w = b;
  w.x = widen(b.x, d.dtype, ws.x, s.x);
  w.weight = widen(b.weight, d.dtype, ws.weight, s.weight);
  w.dy = widen(b.dy, d.dtype, ws.dy, s.y);
  if (d.has_bias) w.bias = widen(b.bias, d.bias_dtype, ws.bias, s.bias);
  if (d.dtype != DType::f32) {
    switch (pass) {
      case ConvPass::forward: w.y = ws.out.get(s.y); break;
      case ConvPass::backward_data: w.dx = ws.out.get(s.x); break;
      case ConvPass::backward_weights: w.dweight = ws.out.get(s.weight); break;
    }
  }
  if (b.dbias != nullptr && d.bias_dtype != DType::f32) w.dbias = ws.dbias.get(s.bias);
  return w;
}

void finish_widened(ConvPass pass, const Conv2dDesc& d, const ConvBuffers& w,
                    const ConvBuffers& b) {
  const Sizes s(d);
  if (d.dtype != DType::f32) {
    switch (pass) {
      case ConvPass::forward: cpu::convert(w.y, DType::f32, b.y, d.dtype, s.y); break;
      case ConvPass::backward_data: cpu::convert(w.dx, DType::f32, b.dx, d.dtype, s.x); break;
      case ConvPass::backward_weights:
        cpu::convert(w.dweight, DType::f32, b.dweight, d.dtype, s.weight);
        break;
    }
  }
  if (b.dbias != nullptr && w.dbias != b.dbias) {
    cpu::convert(w.dbias, DType::f32, b.dbias, d.bias_dtype, s.bias);
  }
}

void run(ConvPass pass, const Conv2dDesc& d, const ConvBuffers& bufs) {
  thread_local Workspace ws;
  const bool verbose = verbose_enabled();
  cpu::ConvOnednnInfo info;
  cpu::ConvOnednnInfo* want = verbose ? &info : nullptr;
  std::string skipped;
  const bool try_native_bf16 = d.dtype == DType::bf16 && bf16_native(d);
  Conv2dDesc wd = d;  // the widened pass's descriptor
  wd.dtype = DType::f32;
  wd.bias_dtype = DType::f32;
  const bool direct_dtype = d.dtype == DType::f32 || try_native_bf16;
  bool blocked = use_blocked(pass, d, direct_dtype ? d : wd);
  bool ran = false;
  if (direct_dtype) ran = cpu::onednn_conv(pass, d, blocked, bufs, want);
  const bool widened = !ran;
  if (widened) {
    if (verbose && d.dtype == DType::bf16) {
      skipped = "onednn bf16 convolution: " + bf16_skip_reason(try_native_bf16, info);
    }
    if (verbose && d.dtype == DType::f16) skipped = "native f16 convolution: none in oneDNN 2.6 on CPU";
    if (direct_dtype) blocked = use_blocked(pass, d, wd);  // native bf16 was refused
    const ConvBuffers wb = widen_pass(pass, d, bufs, ws);
    ran = cpu::onednn_conv(pass, wd, blocked, wb, want);
    MIXPREC_CHECK(ran, BackendError, op_name(pass),
                  "oneDNN has no f32 convolution for this shape; set MIXPREC_CONV=ref to use the "
                  "reference kernel");
    finish_widened(pass, d, wb, bufs);
  }
  if (verbose) {
    std::string impl;
    if (widened && d.dtype != DType::f32) impl += std::string(name(d.dtype)) + "->f32 + ";
    impl += info.impl;
    if (info.cached) impl += " (cached)";
    if (info.reordered) impl += d.channels_last ? " + reorders from/to nhwc" : " + reorders from/to nchw";
    else impl += d.channels_last ? " on nhwc" : " on nchw";
    if (info.weights_reordered) impl += " (weights in its layout)";
    if (widened && d.dtype != DType::f32) impl += std::string(" + round to ") + name(d.dtype);
    verbose_log(op_name(pass), name(d.dtype), impl, skipped);
  }
}

// Reference for forced or degenerate (some extent zero) calls; returns true if it ran.
template <class Fn>
bool reference_if_needed(ConvPass pass, const Conv2dDesc& d, Fn&& fn) {
  const bool empty = d.n == 0 || d.c == 0 || d.o == 0 || d.h == 0 || d.w == 0;
  if (!empty && !force_reference()) return false;
  fn();
  if (verbose_enabled()) {
    verbose_log(op_name(pass), name(d.dtype), "ref",
                empty ? "onednn: an extent is zero" : "onednn: MIXPREC_CONV=ref");
  }
  return true;
}

// The direct few-channel kernel, when it covers the pass and is enabled; returns true if it ran.
template <class Fn>
bool direct_if_covered(ConvPass pass, const Conv2dDesc& d, Fn&& fn) {
  if (!direct_enabled().load(std::memory_order_relaxed) || !cpu::conv_direct_covers(pass, d)) {
    return false;
  }
  fn();
  if (verbose_enabled()) {
    verbose_log(op_name(pass), name(d.dtype), std::string("direct ") + simd_target(),
                cpu::simd_cap_reason());
  }
  return true;
}

void check_ptr(const char* op, const void* p, const char* what) {
  MIXPREC_CHECK(p != nullptr, ValueError, op, what << " is null");
}

}  // namespace

ConvBf16Route set_conv_bf16_route(ConvBf16Route route) { return bf16_route().exchange(route); }
ConvLayout set_conv_layout(ConvLayout l) { return layout().exchange(l); }
bool set_conv_direct(bool enabled) { return direct_enabled().exchange(enabled); }
std::size_t conv_cache_size() { return cpu::onednn_conv_cache_size(); }
void conv_cache_clear() { cpu::onednn_conv_cache_clear(); }

namespace cpu {
void conv2d(const Conv2dDesc& d, const void* x, const void* weight, const void* bias, void* y) {
  validate_conv2d("conv2d", d);
  if (d.has_bias) check_ptr("conv2d", bias, "bias");
  if (reference_if_needed(ConvPass::forward, d, [&] { ref::conv2d(d, x, weight, bias, y); })) {
    return;
  }
  check_ptr("conv2d", x, "x");
  check_ptr("conv2d", weight, "weight");
  check_ptr("conv2d", y, "y");
  if (direct_if_covered(ConvPass::forward, d,
                        [&] { cpu::conv_direct_forward(d, x, weight, bias, y); })) {
    return;
  }
  ConvBuffers b;
  b.x = x, b.weight = weight, b.bias = d.has_bias ? bias : nullptr, b.y = y;
  run(ConvPass::forward, d, b);
}

void conv2d_backward_data(const Conv2dDesc& d, const void* dy, const void* weight, void* dx) {
  validate_conv2d("conv2d_backward_data", d);
  Conv2dDesc nd = d;
  nd.has_bias = false;  // the data gradient does not depend on the bias
  if (reference_if_needed(ConvPass::backward_data, nd,
                          [&] { ref::conv2d_backward_data(nd, dy, weight, dx); })) {
    return;
  }
  check_ptr("conv2d_backward_data", dy, "dy");
  check_ptr("conv2d_backward_data", weight, "weight");
  check_ptr("conv2d_backward_data", dx, "dx");
  ConvBuffers b;
  b.dy = dy, b.weight = weight, b.dx = dx;
  run(ConvPass::backward_data, nd, b);
}

void conv2d_backward_weights(const Conv2dDesc& d, const void* x, const void* dy, void* dweight,
                             void* dbias) {
  validate_conv2d("conv2d_backward_weights", d);
  Conv2dDesc nd = d;
  nd.has_bias = dbias != nullptr;
  if (reference_if_needed(ConvPass::backward_weights, nd,
                          [&] { ref::conv2d_backward_weights(nd, x, dy, dweight, dbias); })) {
    return;
  }
  check_ptr("conv2d_backward_weights", x, "x");
  check_ptr("conv2d_backward_weights", dy, "dy");
  check_ptr("conv2d_backward_weights", dweight, "dweight");
  if (direct_if_covered(ConvPass::backward_weights, nd, [&] {
        cpu::conv_direct_backward_weights(nd, x, dy, dweight, dbias);
      })) {
    return;
  }
  ConvBuffers b;
  b.x = x, b.dy = dy, b.dweight = dweight, b.dbias = dbias;
  run(ConvPass::backward_weights, nd, b);
}
}  // namespace cpu

}  // namespace mixprec::kernels
