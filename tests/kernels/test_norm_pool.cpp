// The fused batch norm + ReLU + max pool kernels against the unfused kernels they replace (the
// same backend's batch_norm_forward with its ReLU, max_pool2d, max_pool2d_backward and
// batch_norm_backward) and against the reference, on every SIMD level of this CPU, both
// layouts, every dtype, training and eval, NaN and Inf.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/backend.h"
#include "kernels/kernel_test_util.h"
#include "kernels/norm.h"
#include "kernels/spec/pool_math.h"
#include "mixprec/core/error.h"

namespace mixprec::kernels {
namespace {

using ktest::Buffer;
using ktest::random_buffer;

struct Shape {
  std::int64_t n, c, h, w, kernel;
};
// Channel counts below, at and past a vector on every target; 1-channel images; 3x3 windows.
constexpr Shape kShapes[] = {{2, 3, 4, 6, 2}, {3, 37, 6, 4, 2}, {2, 16, 6, 6, 3},
                             {4, 32, 8, 8, 2}, {2, 1, 2, 2, 2}, {5, 70, 4, 2, 2}};

Pool2dDesc desc_of(const Shape& s, DType t, bool channels_last) {
  Pool2dDesc d;
  d.n = s.n, d.c = s.c, d.h = s.h, d.w = s.w, d.kernel = d.stride = s.kernel, d.dtype = t;
  d.channels_last = channels_last;
  return d;
}

struct Inputs {
  Buffer x, weight, bias, dy;
};

Inputs inputs_of(const Pool2dDesc& d, std::uint32_t seed, bool specials) {
  Inputs in{random_buffer(d.dtype, d.n * d.c * d.h * d.w, -3.0f, 4.0f, seed),
            random_buffer(DType::f32, d.c, -1.5f, 1.5f, seed + 1),  // negative scales too
            random_buffer(DType::f32, d.c, -0.5f, 0.5f, seed + 2),
            random_buffer(d.dtype, d.n * d.c * d.out_h() * d.out_w(), -1.0f, 1.0f, seed + 3)};
  if (specials) {  // in eval mode, so the statistics stay finite
    in.x.set(0, NAN);
    in.x.set(5 % in.x.size(), INFINITY);
    in.x.set(7 % in.x.size(), -INFINITY);
    in.dy.set(1 % in.dy.size(), NAN);
  }
  return in;
}

struct Forward {
  Buffer y, mean, var;
  std::vector<std::uint8_t> argmax;  // window-local
};

/// The unfused pair on backend b: batch norm with its ReLU into a full-size buffer, then pool.
Forward unfused_forward(const Backend& b, const Pool2dDesc& d, const Inputs& in, bool training,
                        const Buffer& running_mean, const Buffer& running_var, Buffer* normed,
                        std::vector<std::int32_t>* argmax) {
  Forward f{Buffer(d.dtype, d.n * d.c * d.out_h() * d.out_w()), running_mean, running_var, {}};
  b.batch_norm_forward(in.x.data(), d.dtype, detail::batch_norm_dims_of(d),
                       static_cast<const float*>(in.weight.data()),
                       static_cast<const float*>(in.bias.data()), 1e-5f, training,
                       static_cast<float*>(f.mean.data()), static_cast<float*>(f.var.data()),
                       normed->data(), d.dtype, nullptr, true);
  argmax->resize(static_cast<std::size_t>(f.y.size()));
  b.max_pool2d(d, normed->data(), f.y.data(), argmax->data());
  for (std::int64_t i = 0; i < f.y.size(); ++i) {
    f.argmax.push_back(pool::window_index_of(d, i, (*argmax)[static_cast<std::size_t>(i)]));
  }
  return f;
}

Forward fused_forward(const Backend& b, const Pool2dDesc& d, const Inputs& in, bool training,
                      const Buffer& running_mean, const Buffer& running_var) {
  Forward f{Buffer(d.dtype, d.n * d.c * d.out_h() * d.out_w()), running_mean, running_var, {}};
  f.argmax.resize(static_cast<std::size_t>(f.y.size()));
  b.batch_norm_relu_max_pool2d(d, in.x.data(), static_cast<const float*>(in.weight.data()),
                               static_cast<const float*>(in.bias.data()), 1e-5f, training,
                               static_cast<float*>(f.mean.data()),
                               static_cast<float*>(f.var.data()), f.y.data(), f.argmax.data());
  return f;
}

struct Grads {
  Buffer dx, dw, db;
};

Grads fused_backward(const Backend& b, const Pool2dDesc& d, const Inputs& in, const Forward& f,
                     bool training) {
  Grads g{Buffer(d.dtype, in.x.size()), Buffer(DType::f32, d.c), Buffer(DType::f32, d.c)};
  b.batch_norm_relu_max_pool2d_backward(
      d, in.x.data(), f.y.data(), f.argmax.data(), in.dy.data(),
      static_cast<const float*>(f.mean.data()), static_cast<const float*>(f.var.data()), 1e-5f,
      static_cast<const float*>(in.weight.data()), training, g.dx.data(),
      static_cast<float*>(g.dw.data()), static_cast<float*>(g.db.data()));
  return g;
}

Grads unfused_backward(const Backend& b, const Pool2dDesc& d, const Inputs& in, const Forward& f,
                       bool training, const Buffer& normed, const std::vector<std::int32_t>& argmax) {
  Grads g{Buffer(d.dtype, in.x.size()), Buffer(DType::f32, d.c), Buffer(DType::f32, d.c)};
  Buffer dnormed(d.dtype, in.x.size());
  b.max_pool2d_backward(d, in.dy.data(), argmax.data(), dnormed.data());
  b.batch_norm_backward(in.x.data(), d.dtype, dnormed.data(), d.dtype,
                        detail::batch_norm_dims_of(d), static_cast<const float*>(f.mean.data()),
                        static_cast<const float*>(f.var.data()), 1e-5f,
                        static_cast<const float*>(in.weight.data()), training, g.dx.data(),
                        d.dtype, static_cast<float*>(g.dw.data()),
                        static_cast<float*>(g.db.data()), normed.data(), nullptr);
  return g;
}

/// Gradient sums over the argmax pixels in another order: within f32 roundings of sums whose
/// terms are O(1) (atol), relative k roundings of the dtype for dx.
void expect_grads_close(const Grads& got, const Grads& want, DType t, const std::string& what) {
  ktest::expect_close(got.dx, want.dx, 1e-4, 8.0, what + " dx");
  ktest::expect_close(got.dw, want.dw, 1e-4, 8.0, what + " dweight");
  ktest::expect_close(got.db, want.db, 1e-4, 8.0, what + " dbias");
  (void)t;
}

void check_shape(const Shape& s, DType t, bool channels_last, bool training, std::uint32_t seed) {
  const Pool2dDesc d = desc_of(s, t, channels_last);
  const std::string what = std::string(name(t)) + (channels_last ? " nhwc " : " nchw ") +
                           (training ? "training " : "eval ") + std::to_string(s.c) + "ch " +
                           std::to_string(s.h) + "x" + std::to_string(s.w) + "/" +
                           std::to_string(s.kernel);
  const Inputs in = inputs_of(d, seed, !training);
  const Buffer rm = random_buffer(DType::f32, d.c, -0.5f, 0.5f, seed + 7);
  const Buffer rv = random_buffer(DType::f32, d.c, 0.5f, 2.0f, seed + 8);
  Buffer normed(t, in.x.size());
  std::vector<std::int32_t> argmax;
  const Backend& cpu = cpu_backend();
  const Forward want = unfused_forward(cpu, d, in, training, rm, rv, &normed, &argmax);
  const Forward got = fused_forward(cpu, d, in, training, rm, rv);
  // The forward is the unfused kernels' bits: statistics, rounding, ReLU, first maximum, NaN.
  ktest::expect_bitwise(got.y, want.y, what + " y");
  ktest::expect_bitwise(got.mean, want.mean, what + " mean");
  ktest::expect_bitwise(got.var, want.var, what + " var");
  EXPECT_EQ(got.argmax, want.argmax) << what << " argmax";
  const Forward ref_f = fused_forward(ref_backend(), d, in, training, rm, rv);
  ktest::expect_close(got.y, ref_f.y, 1e-5, 4.0, what + " y vs ref");
  const Grads g = fused_backward(cpu, d, in, got, training);
  expect_grads_close(g, unfused_backward(cpu, d, in, want, training, normed, argmax), t, what);
  expect_grads_close(g, fused_backward(ref_backend(), d, in, got, training), t, what + " vs ref");
}

TEST(BatchNormPoolKernel, FusedIsTheUnfusedKernelsOnEveryIsa) {
  for (Isa isa : ktest::isas_to_test()) {
    ktest::IsaCap cap(isa);
    SCOPED_TRACE(name(isa));
    std::uint32_t seed = 500;
    for (DType t : ktest::kAllDTypes) {
      for (bool channels_last : {true, false}) {
        for (bool training : {true, false}) {
          for (const Shape& s : kShapes) check_shape(s, t, channels_last, training, seed += 10);
        }
      }
    }
  }
}

// Asking for no dx still yields the parameter gradients, and the reverse.
TEST(BatchNormPoolKernel, EachGradientMayBeLeftOut) {
  const Pool2dDesc d = desc_of({4, 32, 8, 8, 2}, DType::bf16, true);
  const Inputs in = inputs_of(d, 900, false);
  const Buffer rm(DType::f32, d.c), rv(DType::f32, d.c);
  const Forward f = fused_forward(cpu_backend(), d, in, true, rm, rv);
  const Grads all = fused_backward(cpu_backend(), d, in, f, true);
  Buffer dw(DType::f32, d.c), db(DType::f32, d.c), dx(d.dtype, in.x.size());
  const auto* mp = static_cast<const float*>(f.mean.data());
  const auto* vp = static_cast<const float*>(f.var.data());
  const auto* wp = static_cast<const float*>(in.weight.data());
  cpu_backend().batch_norm_relu_max_pool2d_backward(
      d, in.x.data(), f.y.data(), f.argmax.data(), in.dy.data(), mp, vp, 1e-5f, wp, true, nullptr,
      static_cast<float*>(dw.data()), static_cast<float*>(db.data()));
  ktest::expect_bitwise(dw, all.dw, "dweight without dx");
  ktest::expect_bitwise(db, all.db, "dbias without dx");
  cpu_backend().batch_norm_relu_max_pool2d_backward(d, in.x.data(), f.y.data(), f.argmax.data(),
                                                    in.dy.data(), mp, vp, 1e-5f, wp, true,
                                                    dx.data(), nullptr, nullptr);
  ktest::expect_bitwise(dx, all.dx, "dx alone");
}

TEST(BatchNormPoolKernel, RefusesWindowsThatDoNotTileTheImage) {
  float mean[3], var[3];
  Buffer x(DType::f32, 2 * 3 * 5 * 6), y(DType::f32, 2 * 3 * 2 * 3);
  Pool2dDesc d = desc_of({2, 3, 5, 6, 2}, DType::f32, true);  // 5 rows: not a multiple of 2
  for (const Backend* b : {&cpu_backend(), &ref_backend()}) {
    EXPECT_THROW(b->batch_norm_relu_max_pool2d(d, x.data(), nullptr, nullptr, 1e-5f, true, mean,
                                               var, y.data(), nullptr),
                 ValueError);
  }
  d = desc_of({2, 3, 4, 6, 2}, DType::f32, true);
  d.stride = 1;  // overlapping windows
  EXPECT_THROW(cpu_backend().batch_norm_relu_max_pool2d(d, x.data(), nullptr, nullptr, 1e-5f,
                                                        true, mean, var, y.data(), nullptr),
               ValueError);
}

}  // namespace
}  // namespace mixprec::kernels
