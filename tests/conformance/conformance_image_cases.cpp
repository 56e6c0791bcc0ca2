// The conformance cases of the image kernels: batch norm (training and evaluation, its ReLU and
// residual epilogues, the split passes of synchronised batch norm), the fused batch norm + ReLU +
// max pool, max / average / global average pooling and the three convolution passes, NCHW and
// channels-last (conformance_cases.h says how cases run).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "conformance/conformance_cases.h"
#include "conformance/conformance_util.h"
#include "kernels/backend.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::conformance {
namespace {

using ktest::Buffer;
using ktest::HostArray;
using ktest::random_buffer;


/// What follows batch norm in the kernel (BatchNormEpilogue in the ops): nothing, ReLU, or the
/// residual add then ReLU.
enum class BnEpilogue { none, relu, add_relu };

Outs run_batch_norm(const Backend& b, DType t, bool training, bool backward,
                    BnEpilogue epilogue = BnEpilogue::none) {
  const BatchNormDims d{5, 6, 49};
  const std::int64_t n = d.n * d.c * d.s;
  const Buffer x = random_buffer(t, n, -3.0f, 5.0f, 20);
  const Buffer w = random_buffer(DType::f32, d.c, 0.5f, 1.5f, 21);
  const Buffer bias = random_buffer(DType::f32, d.c, -0.5f, 0.5f, 22);
  // A residual about as large as the normalised values, so the ReLU cuts a fair share.
  const Buffer residual = random_buffer(t, n, -1.5f, 1.0f, 26);
  const void* r = epilogue == BnEpilogue::add_relu ? residual.data() : nullptr;
  const bool relu = epilogue != BnEpilogue::none;
  Buffer mean(DType::f32, d.c), var(DType::f32, d.c);
  if (!training) {
    mean = random_buffer(DType::f32, d.c, 0.0f, 1.0f, 23);
    var = random_buffer(DType::f32, d.c, 0.5f, 2.0f, 24);
  }
  auto* wp = static_cast<const float*>(w.data());
  Buffer y(t, n);
  if (!backward) {
    b.batch_norm_forward(x.data(), t, d, wp, static_cast<const float*>(bias.data()), 1e-5f,
                         training, static_cast<float*>(mean.data()),
                         static_cast<float*>(var.data()), y.data(), t, r, relu);
    Outs o{close("y", std::move(y), 1e-5, 4.0)};
    if (training) {
      o.push_back(close("mean", std::move(mean), 1e-6, 8.0));
      o.push_back(close("var", std::move(var), 1e-6, 8.0));
    }
    return o;
  }
  // The backward reads the reference's forward output (the ReLU's mask), so every backend
  // masks the same elements and the residual's gradient compares exactly.
  ref::batch_norm_forward(x.data(), t, d, wp, static_cast<const float*>(bias.data()), 1e-5f,
                          training, static_cast<float*>(mean.data()),
                          static_cast<float*>(var.data()), y.data(), t, r, relu);
  const Buffer dy = random_buffer(t, n, -1.0f, 1.0f, 25);
  Buffer dx(t, n), dw(DType::f32, d.c), db(DType::f32, d.c), dr(t, r != nullptr ? n : 0);
  b.batch_norm_backward(x.data(), t, dy.data(), t, d, static_cast<const float*>(mean.data()),
                        static_cast<const float*>(var.data()), 1e-5f, wp, training, dx.data(), t,
                        static_cast<float*>(dw.data()), static_cast<float*>(db.data()),
                        relu ? y.data() : nullptr, r != nullptr ? dr.data() : nullptr);
  Outs o{close("dx", std::move(dx), 1e-4, 8.0), close("dweight", std::move(dw), 1e-4, 8.0),
         close("dbias", std::move(db), 1e-4, 8.0)};
  if (r != nullptr) o.push_back(exact("dresidual", std::move(dr)));
  return o;
}

/// Per-channel doubles (statistics, gradient sums) as an f32 buffer for comparison.
Buffer f32_buffer(const HostArray<double>& v) {
  Buffer b(DType::f32, static_cast<std::int64_t>(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i) b.set(static_cast<std::int64_t>(i), static_cast<float>(v[i]));
  return b;
}

// The split batch norm of ops::sync_batch_norm: 0 = stats, 1 = backward_reduce, 2 = backward_elemt
// (with sums and a count from "other ranks", not this batch's).
Outs run_batch_norm_split(const Backend& b, DType t, int pass) {
  const BatchNormDims d{5, 6, 49};
  const std::int64_t n = d.n * d.c * d.s;
  const auto c = static_cast<std::size_t>(d.c);
  const Buffer x = random_buffer(t, n, -3.0f, 5.0f, 20);
  const Buffer dy = random_buffer(t, n, -1.0f, 1.0f, 25);
  const Buffer mean = random_buffer(DType::f32, d.c, 0.0f, 1.0f, 23);
  const Buffer var = random_buffer(DType::f32, d.c, 0.5f, 2.0f, 24);
  const Buffer w = random_buffer(DType::f32, d.c, 0.5f, 1.5f, 21);
  const auto* mp = static_cast<const float*>(mean.data());
  HostArray<double> a(c), s(c);
  if (pass == 0) {
    b.batch_norm_stats(x.data(), t, d, a.data(), s.data());
    return {close("mean", f32_buffer(a), 1e-6, 8.0), close("m2", f32_buffer(s), 1e-4, 8.0)};
  }
  if (pass == 1) {
    b.batch_norm_backward_reduce(x.data(), t, dy.data(), t, d, mp, a.data(), s.data());
    return {close("sum_dy", f32_buffer(a), 1e-4, 8.0), close("sum_dy_xmu", f32_buffer(s), 1e-4, 8.0)};
  }
  for (std::size_t i = 0; i < c; ++i) {
    a[i] = 5.0 * static_cast<double>(i) - 12.0;
    s[i] = 3.5 - static_cast<double>(i);
  }
  Buffer dx(t, n);
  b.batch_norm_backward_elemt(x.data(), t, dy.data(), t, d, mp, static_cast<const float*>(var.data()),
                              1e-5f, static_cast<const float*>(w.data()), a.data(), s.data(),
                              4.0 * static_cast<double>(d.n * d.s), dx.data(), t);
  return {close("dx", std::move(dx), 1e-4, 8.0)};
}

// Batch norm + ReLU + max pooling in one op: 2x2 windows on 6x8 and 3x3 on 6x9 images, NCHW and
// channels-last, 5 channels (a vector's tail on every target). The forward's statistics and
// values are batch_norm_relu's, then the pool's; the backward recomputes both and its sums run
// over the argmax pixels only.
Outs run_batch_norm_pool(const Backend& b, DType t, bool backward) {
  Outs o;
  const std::int64_t shapes[][3] = {{2, 6, 8}, {3, 6, 9}};
  for (bool channels_last : {false, true}) {
    for (const auto& s : shapes) {
      Pool2dDesc d;
      d.n = 3, d.c = 5, d.h = s[1], d.w = s[2], d.kernel = d.stride = s[0], d.dtype = t;
      d.channels_last = channels_last;
      const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.out_h() * d.out_w();
      const Buffer x = random_buffer(t, nx, -3.0f, 5.0f, 40);
      const Buffer w = random_buffer(DType::f32, d.c, 0.5f, 1.5f, 41);
      const Buffer bias = random_buffer(DType::f32, d.c, -0.5f, 0.5f, 42);
      const auto* wp = static_cast<const float*>(w.data());
      const auto* bp = static_cast<const float*>(bias.data());
      Buffer mean(DType::f32, d.c), var(DType::f32, d.c), y(t, ny);
      HostArray<std::uint8_t> argmax(static_cast<std::size_t>(ny));
      auto* mp = static_cast<float*>(mean.data());
      auto* vp = static_cast<float*>(var.data());
      if (!backward) {
        b.batch_norm_relu_max_pool2d(d, x.data(), wp, bp, 1e-5f, true, mp, vp, y.data(),
                                     argmax.data());
        o.push_back(close("y", std::move(y), 1e-5, 4.0));
        o.push_back(close("mean", std::move(mean), 1e-6, 8.0));
        o.push_back(close("var", std::move(var), 1e-6, 8.0));
        Buffer index(DType::f32, ny);  // one rounding apart may pick another maximum: as y
        for (std::int64_t i = 0; i < ny; ++i) index.set(i, argmax[static_cast<std::size_t>(i)]);
        o.push_back(close("argmax", std::move(index), 0.0, 0.0));
        continue;
      }
      ref::batch_norm_relu_max_pool2d(d, x.data(), wp, bp, 1e-5f, true, mp, vp, y.data(),
                                      argmax.data());
      const Buffer dy = random_buffer(t, ny, -1.0f, 1.0f, 43);
      Buffer dx(t, nx), dw(DType::f32, d.c), db(DType::f32, d.c);
      b.batch_norm_relu_max_pool2d_backward(d, x.data(), y.data(), argmax.data(), dy.data(), mp,
                                            vp, 1e-5f, wp, true, dx.data(),
                                            static_cast<float*>(dw.data()),
                                            static_cast<float*>(db.data()));
      o.push_back(close("dx", std::move(dx), 1e-4, 8.0));
      o.push_back(close("dweight", std::move(dw), 1e-4, 8.0));
      o.push_back(close("dbias", std::move(db), 1e-4, 8.0));
    }
  }
  return o;
}

// ---- pooling and convolution ----

Pool2dDesc pool_desc(DType t, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  Pool2dDesc d;
  d.n = 2, d.c = 3, d.h = 13, d.w = 15, d.kernel = kernel, d.stride = stride, d.padding = padding;
  d.dtype = t;
  return d;
}

Outs run_max_pool(const Backend& b, DType t, std::int64_t kernel, std::int64_t stride,
                  std::int64_t padding, bool backward) {
  const Pool2dDesc d = pool_desc(t, kernel, stride, padding);
  const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.out_h() * d.out_w();
  const Buffer x = random_buffer(t, nx, -4.0f, 4.0f, 30);
  Buffer y(t, ny);
  HostArray<std::int32_t> argmax(static_cast<std::size_t>(ny));
  if (!backward) {
    b.max_pool2d(d, x.data(), y.data(), argmax.data());
    return {exact("y", std::move(y)), exact("argmax", int_buffer(argmax))};
  }
  ref::max_pool2d(d, x.data(), y.data(), argmax.data());
  const Buffer dy = random_buffer(t, ny, -1.0f, 1.0f, 31);
  Buffer dx(t, nx);
  b.max_pool2d_backward(d, dy.data(), argmax.data(), dx.data());
  // Overlapping windows sum in f32 in a fixed order; disjoint ones copy.
  return {close("dx", std::move(dx), 1e-6, kRound)};
}

Outs run_avg_pool(const Backend& b, DType t, std::int64_t kernel, std::int64_t stride,
                  std::int64_t padding, bool backward) {
  const Pool2dDesc d = pool_desc(t, kernel, stride, padding);
  const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.out_h() * d.out_w();
  if (!backward) {
    const Buffer x = random_buffer(t, nx, -4.0f, 4.0f, 32);
    Buffer y(t, ny);
    b.avg_pool2d(d, x.data(), y.data());
    return {close("y", std::move(y), 1e-6, kRound)};
  }
  const Buffer dy = random_buffer(t, ny, -1.0f, 1.0f, 33);
  Buffer dx(t, nx);
  b.avg_pool2d_backward(d, dy.data(), dx.data());
  return {close("dx", std::move(dx), 1e-6, kRound)};
}

Outs run_global_avg_pool(const Backend& b, DType t, bool backward) {
  const std::int64_t planes = 37, hw = 49;
  if (!backward) {
    const Buffer x = random_buffer(t, planes * hw, -4.0f, 4.0f, 34);
    Buffer y(t, planes);
    b.global_avg_pool2d(x.data(), t, planes, hw, y.data());
    return {close("y", std::move(y), 1e-6, kRound)};
  }
  const Buffer dy = random_buffer(t, planes, -1.0f, 1.0f, 35);
  Buffer dx(t, planes * hw);
  b.global_avg_pool2d_backward(dy.data(), t, planes, hw, dx.data());
  return {close("dx", std::move(dx), 1e-7, kRound)};
}

Conv2dDesc conv_desc(DType t) {
  Conv2dDesc d;
  d.n = 2, d.c = 3, d.h = 9, d.w = 11, d.o = 5, d.kh = 3, d.kw = 3, d.stride = 1, d.padding = 1;
  d.dtype = t, d.has_bias = true, d.bias_dtype = DType::f32;
  return d;
}

Outs run_conv(const Backend& b, DType t, int pass) {
  const Conv2dDesc d = conv_desc(t);
  const std::int64_t nx = d.n * d.c * d.h * d.w, nw = d.o * d.c * d.kh * d.kw;
  const std::int64_t ny = d.n * d.o * d.out_h() * d.out_w();
  const Buffer x = random_buffer(t, nx, -1.0f, 1.0f, 36);
  const Buffer w = random_buffer(t, nw, -1.0f, 1.0f, 37);
  const Buffer bias = random_buffer(DType::f32, d.o, -1.0f, 1.0f, 38);
  const Buffer dy = random_buffer(t, ny, -1.0f, 1.0f, 39);
  // Sums of c*kh*kw = 27 (or n*ho*wo = 198) products of values below 1 in magnitude.
  const double atol = 198 * 1.2e-7 * 4;
  if (pass == 0) {
    Buffer y(t, ny);
    b.conv2d(d, x.data(), w.data(), bias.data(), y.data());
    return {close("y", std::move(y), atol, kRound)};
  }
  if (pass == 1) {
    Buffer dx(t, nx);
    b.conv2d_backward_data(d, dy.data(), w.data(), dx.data());
    return {close("dx", std::move(dx), atol, kRound)};
  }
  Buffer dw(t, nw), db(DType::f32, d.o);
  b.conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), db.data());
  return {close("dweight", std::move(dw), atol, kRound), close("dbias", std::move(db), atol, kRound)};
}

}  // namespace

void add_image_cases(std::vector<Case>& c) {
  const auto F = all_float();
  for (bool bwd : {false, true}) {
    for (bool training : {true, false}) {
      c.push_back({std::string(bwd ? "batch_norm_backward" : "batch_norm_forward") +
                       (training ? "_train" : "_eval"),
                   F, [bwd, training](const Backend& b, DType t) {
                     return run_batch_norm(b, t, training, bwd);
                   }});
    }
    for (BnEpilogue e : {BnEpilogue::relu, BnEpilogue::add_relu}) {
      c.push_back({std::string(bwd ? "batch_norm_backward" : "batch_norm_forward") +
                       (e == BnEpilogue::relu ? "_relu" : "_add_relu"),
                   F, [bwd, e](const Backend& b, DType t) {
                     return run_batch_norm(b, t, true, bwd, e);
                   }});
    }
    c.push_back({std::string("batch_norm_relu_max_pool2d") + (bwd ? "_backward" : ""), F,
                 [bwd](const Backend& b, DType t) { return run_batch_norm_pool(b, t, bwd); }});
    c.push_back({std::string("max_pool2d") + (bwd ? "_backward" : ""), F,
                 [bwd](const Backend& b, DType t) {
                   Outs o = run_max_pool(b, t, 2, 2, 0, bwd);
                   for (Out& x : run_max_pool(b, t, 3, 2, 1, bwd)) o.push_back(std::move(x));
                   return o;
                 }});
    c.push_back({std::string("avg_pool2d") + (bwd ? "_backward" : ""), F,
                 [bwd](const Backend& b, DType t) {
                   Outs o = run_avg_pool(b, t, 2, 2, 0, bwd);
                   for (Out& x : run_avg_pool(b, t, 3, 2, 1, bwd)) o.push_back(std::move(x));
                   return o;
                 }});
    c.push_back({std::string("global_avg_pool2d") + (bwd ? "_backward" : ""), F,
                 [bwd](const Backend& b, DType t) { return run_global_avg_pool(b, t, bwd); }});
  }
  for (int pass = 0; pass < 3; ++pass) {
    const char* names[] = {"conv2d", "conv2d_backward_data", "conv2d_backward_weights"};
    c.push_back({names[pass], F, [pass](const Backend& b, DType t) { return run_conv(b, t, pass); }});
  }
  // batch norm split into reductions and element-wise passes (ops::sync_batch_norm)
  const char* split_names[] = {"batch_norm_stats", "batch_norm_backward_reduce",
                               "batch_norm_backward_elemt"};
  for (int pass = 0; pass < 3; ++pass) {
    c.push_back({split_names[pass], F,
                 [pass](const Backend& b, DType t) { return run_batch_norm_split(b, t, pass); }});
  }
}

}  // namespace mixprec::kernels::conformance
