// The backend conformance cases: see conformance_cases.h. (In the spirit of ggml's
// test-backend-ops.) Semantic tests (edge cases, error messages, gradients by finite differences)
// stay in the per-family test files; the comparison against the reference lives here only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "conformance/conformance_cases.h"
#include "conformance/conformance_util.h"
#include "kernels/backend.h"
#include "kernels/kernel_test_util.h"
#include "mixprec/core/half.h"

namespace mixprec::kernels::conformance {
namespace {

using ktest::Buffer;
using ktest::HostArray;
using ktest::random_buffer;

// ---- elementwise ----

Outs run_unary(const Backend& b, DType t, UnaryOp op, float lo, float hi, std::int64_t n) {
  const Buffer x = random_buffer(t, n, lo, hi, 11);
  Buffer y(t, n);
  const std::vector<std::int64_t> shape{n}, strides{1};
  b.unary(op, shape, {x.data(), t, strides}, y.data(), t);
  const bool is_exact = info(op).simd_ulps == 0.0;  // the op list: bit-identical
  if (is_exact) return {exact("y", std::move(y))};
  return {close("y", std::move(y), 1e-30, kTranscendental)};
}

Outs run_unary_backward(const Backend& b, DType t, UnaryOp op, float lo, float hi) {
  const std::int64_t n = 1027;
  const Buffer x = random_buffer(t, n, lo, hi, 12);
  Buffer y(t, n);
  const std::vector<std::int64_t> shape{n}, strides{1};
  ref::unary(op, shape, {x.data(), t, strides}, y.data(), t);  // forward output, same for all
  const Buffer dy = random_buffer(t, n, -1.0f, 1.0f, 13);
  Buffer dx(t, n);
  b.unary_backward(op, x.data(), t, y.data(), t, dy.data(), t, dx.data(), t, n);
  // gelu' = Phi(x) + x phi(x) cancels near x = -0.75 (both terms ~0.23, the sum ~0): there the
  // few-ulp errors of each term (in both implementations) are absolute, not relative to the
  // result; |dy| <= 1 and Phi, |x| phi <= 1.2, so 8 f32 ulps of 1 bound them.
  // gelu_tanh' = s (1 + x w' e s) cancels at the same place, with terms of the same size.
  // silu' = s (1 + x (1 - s)) cancels near x = -1.28 likewise. Ops whose gradient recomputes a
  // transcendental are those the op list marks grad = ulps.
  const double atol = info(op).grad_exact ? 1e-30 : 8 * 1.1920928955078125e-07;
  return {close("dx", std::move(dx), atol, kTranscendental)};
}

Outs run_binary(const Backend& b, DType t, BinaryOp op, std::vector<std::int64_t> shape,
                std::vector<std::int64_t> b_shape) {
  // b_shape broadcasts against shape (1 where broadcast).
  std::int64_t na = 1, nb = 1;
  for (auto s : shape) na *= s;
  for (auto s : b_shape) nb *= s;
  const Buffer a = random_buffer(t, na, 0.5f, 4.0f, 14);
  const Buffer bb = random_buffer(t, nb, 0.5f, 4.0f, 15);
  std::vector<std::int64_t> sa = contiguous(shape), sb = contiguous(b_shape);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (b_shape[i] == 1 && shape[i] != 1) sb[i] = 0;
  }
  Buffer y(t, na);
  b.binary(op, shape, {a.data(), t, sa}, {bb.data(), t, sb}, y.data(), t);
  // pow is a transcendental: glibc's powf and CUDA's differ by an ulp (CUDA documents up to a
  // few); the others are one correctly rounded operation per element.
  if (op == BinaryOp::pow) return {close("y", std::move(y), 1e-30, kTranscendental)};
  return {exact("y", std::move(y))};
}

// ---- reductions, softmax, cross-entropy ----

Outs run_reduce(const Backend& b, DType t, ReduceOp op, std::int64_t outer, std::int64_t n,
                std::int64_t inner) {
  const Buffer x = random_buffer(t, outer * n * inner, -2.0f, 2.0f, 16);
  Buffer y(t, outer * inner);
  b.reduce(op, x.data(), t, outer, n, inner, y.data(), t);
  const bool max_like = op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::amax;
  if (max_like) return {exact("y", std::move(y))};
  // Summation order differs. The worst case, n * eps(f32) * sum|x|, would let a lost chunk of
  // a long row pass; rounding errors of random data add like a random walk, so the bound is
  // sqrt(n) * eps(f32) * sum|x| (sum |x| <= 2n) with a margin of 8, plus one output rounding.
  const double atol = 8.0 * std::sqrt(static_cast<double>(n)) * 2.0 * n * 1.2e-7;
  return {close("y", std::move(y), atol, kRound)};
}

/// One multi-tensor reduction over runs of dtype t and f32 of several sizes (one long enough to
/// split in chunks, one a single element; an empty one for the ops that allow it): each run's
/// value, as tolerant as run_reduce's for sums (max/min/amax exact).
Outs run_reduce_batch(const Backend& b, DType t, ReduceOp op) {
  const bool max_like = op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::amax;
  std::vector<std::int64_t> sizes = {70001, 1, 517, 40000, 8192, 8193, 33};
  if (!max_like) sizes.push_back(0);
  std::vector<Buffer> runs;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    runs.push_back(random_buffer(k % 2 == 0 ? t : DType::f32, sizes[k], -2.0f, 2.0f,
                                 static_cast<std::uint32_t>(90 + k)));
  }
  Buffer y(DType::f32, static_cast<std::int64_t>(runs.size()));
  ReduceBatch batch{};
  batch.op = op;
  batch.out = static_cast<float*>(y.data());
  for (const Buffer& x : runs) batch.runs[batch.size++] = {x.data(), x.dtype(), x.size()};
  b.reduce_batch(batch);
  if (max_like) return {exact("y", std::move(y))};
  const double atol = 8.0 * std::sqrt(70001.0) * 2.0 * 70001.0 * 1.2e-7;  // the longest run's
  return {close("y", std::move(y), atol, kRound)};
}

Outs run_softmax(const Backend& b, DType t, bool log, bool backward) {
  const std::int64_t rows = 7, cols = 1029;
  const Buffer x = random_buffer(t, rows * cols, -8.0f, 8.0f, 17);
  Buffer y(t, rows * cols);
  if (!backward) {
    b.softmax(x.data(), t, rows, cols, y.data(), t, log);
    return {close("y", std::move(y), 1e-6, kTranscendental)};
  }
  ref::softmax(x.data(), t, rows, cols, y.data(), t, log);
  const Buffer dy = random_buffer(t, rows * cols, -1.0f, 1.0f, 18);
  Buffer dx(t, rows * cols);
  b.softmax_backward(y.data(), t, dy.data(), t, rows, cols, dx.data(), t, log);
  return {close("dx", std::move(dx), 1e-5, kTranscendental)};
}

Outs run_cross_entropy(const Backend& b, DType t, bool backward, float smoothing) {
  const std::int64_t rows = 33, cols = 101;
  const Buffer logits = random_buffer(t, rows * cols, -6.0f, 6.0f, 19);
  HostArray<std::int64_t> targets(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) targets[r] = (r * 37) % cols;
  if (!backward) {
    Buffer loss(DType::f32, rows);
    b.cross_entropy(logits.data(), t, rows, cols, targets.data(), smoothing,
                    static_cast<float*>(loss.data()));
    return {close("loss", std::move(loss), 1e-5, 8.0)};
  }
  HostArray<float> g(static_cast<std::size_t>(rows), 0.25f);
  Buffer dlogits(t, rows * cols);
  b.cross_entropy_backward(logits.data(), t, rows, cols, targets.data(), smoothing, g.data(),
                           dlogits.data(), t);
  return {close("dlogits", std::move(dlogits), 1e-7, kTranscendental)};
}

/// The fused kernel out of place and in place (dlogits is the logits buffer, the losses the
/// per-row gradients), with per-row gradients that differ, over warp-sized rows and rows longer
/// than 1024 (a block each on cuda).
Outs run_cross_entropy_fused(const Backend& b, DType t, float smoothing, bool in_place,
                             std::int64_t rows, std::int64_t cols) {
  Buffer logits = random_buffer(t, rows * cols, -6.0f, 6.0f, 19);
  HostArray<std::int64_t> targets(static_cast<std::size_t>(rows));
  HostArray<float> g(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    targets[r] = (r * 37) % cols;
    g[r] = 0.25f * static_cast<float>(r + 1) / static_cast<float>(rows);
  }
  // In place, the losses also overwrite the per-row gradients.
  Buffer loss(DType::f32, rows);
  for (std::int64_t r = 0; r < rows; ++r) loss.set(r, g[r]);
  Buffer dlogits(t, in_place ? 1 : rows * cols);
  void* d = in_place ? logits.data() : dlogits.data();
  b.cross_entropy_fused(logits.data(), t, rows, cols, targets.data(), smoothing,
                        in_place ? static_cast<const float*>(loss.data()) : g.data(),
                        static_cast<float*>(loss.data()), d, t);
  Outs o;
  o.push_back(close("loss", std::move(loss), 1e-5, 8.0));
  o.push_back(close("dlogits", in_place ? std::move(logits) : std::move(dlogits), 1e-7,
                    kTranscendental));
  return o;
}

/// rescale_unless_equal with equal scalars (x untouched, exactly) and with others.
Outs run_rescale_unless_equal(const Backend& b, DType t) {
  const std::int64_t n = 1029;
  Outs o;
  for (const bool equal : {true, false}) {
    Buffer x = random_buffer(t, n, -3.0f, 3.0f, 27);
    HostArray<float> num(1, equal ? 0.375f : 0.7f), den(1, 0.375f);
    b.rescale_unless_equal(x.data(), t, n, num.data(), den.data());
    o.push_back(equal ? exact("x (equal)", std::move(x)) : close("x", std::move(x), 0.0, kRound));
  }
  return o;
}

// ---- normalisation ----

Outs run_layer_norm(const Backend& b, DType t, bool backward) {
  const std::int64_t rows = 9, cols = 515;
  const Buffer x = random_buffer(t, rows * cols, -3.0f, 5.0f, 26);
  const Buffer w = random_buffer(DType::f32, cols, 0.5f, 1.5f, 27);
  const Buffer bias = random_buffer(DType::f32, cols, -0.5f, 0.5f, 28);
  Buffer mean(DType::f32, rows), rstd(DType::f32, rows), y(t, rows * cols);
  auto* wp = static_cast<const float*>(w.data());
  if (!backward) {
    b.layer_norm_forward(x.data(), t, rows, cols, wp, static_cast<const float*>(bias.data()),
                         1e-5f, y.data(), t, static_cast<float*>(mean.data()),
                         static_cast<float*>(rstd.data()));
    return {close("y", std::move(y), 1e-5, 4.0), close("mean", std::move(mean), 1e-6, 8.0),
            close("rstd", std::move(rstd), 1e-6, 8.0)};
  }
  ref::layer_norm_forward(x.data(), t, rows, cols, wp, static_cast<const float*>(bias.data()),
                          1e-5f, y.data(), t, static_cast<float*>(mean.data()),
                          static_cast<float*>(rstd.data()));
  const Buffer dy = random_buffer(t, rows * cols, -1.0f, 1.0f, 29);
  Buffer dx(t, rows * cols), dw(DType::f32, cols), db(DType::f32, cols);
  b.layer_norm_backward(x.data(), t, dy.data(), t, rows, cols,
                        static_cast<const float*>(mean.data()),
                        static_cast<const float*>(rstd.data()), wp, dx.data(), t,
                        static_cast<float*>(dw.data()), static_cast<float*>(db.data()));
  return {close("dx", std::move(dx), 1e-4, 8.0), close("dweight", std::move(dw), 1e-4, 8.0),
          close("dbias", std::move(db), 1e-4, 8.0)};
}

// ---- matmul ----

Outs run_matmul(const Backend& b, DType t, bool trans_a, bool trans_b, bool bias) {
  MatmulDesc d;
  d.m = 17, d.n = 23, d.k = 65, d.trans_a = trans_a, d.trans_b = trans_b;
  d.dtype = t, d.c_dtype = t, d.has_bias = bias, d.bias_dtype = DType::f32;
  const Buffer a = random_buffer(t, d.m * d.k, -1.0f, 1.0f, 40);
  const Buffer bb = random_buffer(t, d.k * d.n, -1.0f, 1.0f, 41);
  const Buffer bv = random_buffer(DType::f32, d.n, -1.0f, 1.0f, 42);
  Buffer c(t, d.m * d.n);
  b.matmul(d, a.data(), bb.data(), bias ? bv.data() : nullptr, c.data());
  return {close("c", std::move(c), 65 * 1.2e-7 * 4, kRound)};
}

// ---- conversions ----

/// n values of dtype t (fp8 included) from random f32 values, rounded by the reference.
Buffer random_any(DType t, std::int64_t n, float lo, float hi, std::uint32_t seed) {
  const Buffer f = random_buffer(DType::f32, n, lo, hi, seed);
  Buffer out(is_storage_only(t) ? DType::f32 : t, n);  // storage size <= 4 bytes per element
  ref::convert(f.data(), DType::f32, out.data(), t, static_cast<std::size_t>(n));
  return out;
}

/// Bits of n elements of dtype t stored at the start of buf, widened into an f32-sized buffer.
Buffer bits_of(const Buffer& buf, DType t, std::int64_t n) {
  Buffer out(DType::f32, n);
  std::memset(out.data(), 0, static_cast<std::size_t>(n) * 4);
  const std::size_t sz = size_of(t);
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(static_cast<char*>(out.data()) + i * 4,
                static_cast<const char*>(buf.data()) + i * static_cast<std::int64_t>(sz), sz);
  }
  return out;
}

Outs run_convert(const Backend& b, DType from, DType to) {
  const std::int64_t n = 70001;  // above the parallel threshold, with a tail
  Buffer src = random_any(from, n, -70000.0f, 70000.0f, 43);
  // Specials at the start: zeros, tiny, huge, Inf, NaN.
  if (from == DType::f32) {
    const float specials[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 3.0e38f, INFINITY, -INFINITY, NAN,
                              65504.0f, 65520.0f, 6.1e-5f, 5.9e-8f, 448.0f, 57344.0f};
    std::memcpy(src.data(), specials, sizeof(specials));
  }
  Buffer dst(DType::f32, n);
  b.convert(src.data(), from, dst.data(), to, static_cast<std::size_t>(n));
  return {exact("dst bits", bits_of(dst, to, n))};
}

Outs run_convert_stochastic(const Backend& b, DType to, std::uint64_t offset) {
  const std::int64_t n = 70001;
  const Buffer src = random_buffer(DType::f32, n, -3.0f, 3.0f, 44);
  Buffer dst(DType::f32, n);
  b.convert_stochastic(static_cast<const float*>(src.data()), dst.data(), to,
                       static_cast<std::size_t>(n), 1234, offset);
  return {exact("dst bits", bits_of(dst, to, n))};
}

}  // namespace

std::vector<Case> cases() {
  std::vector<Case> c;
  const auto F = all_float();
  struct U { UnaryOp op; const char* name; float lo, hi; };
  std::vector<U> unary_ops;  // every op of the list, over the list's domain
  for (const UnaryOpInfo& i : kUnaryOps) unary_ops.push_back({i.op, i.name, i.lo, i.hi});
  for (const U& u : unary_ops) {
    c.push_back({std::string("unary_") + u.name, F, [u](const Backend& b, DType t) {
                   return run_unary(b, t, u.op, u.lo, u.hi, 70001);
                 }});
    c.push_back({std::string("unary_backward_") + u.name, F, [u](const Backend& b, DType t) {
                   return run_unary_backward(b, t, u.op, u.lo, u.hi);
                 }});
  }
  struct Bi { BinaryOp op; const char* name; };
  std::vector<Bi> binary_ops;
  for (BinaryOp op : kBinaryOps) binary_ops.push_back({op, name(op)});
  for (const Bi& bi : binary_ops) {
    c.push_back({std::string("binary_") + bi.name, F, [bi](const Backend& b, DType t) {
                   Outs o = run_binary(b, t, bi.op, {70001}, {70001});
                   for (Out& x : run_binary(b, t, bi.op, {37, 129}, {1, 129})) o.push_back(std::move(x));
                   for (Out& x : run_binary(b, t, bi.op, {37, 129}, {37, 1})) o.push_back(std::move(x));
                   for (Out& x : run_binary(b, t, bi.op, {5, 7, 33}, {1, 1, 1})) o.push_back(std::move(x));
                   for (Out& x : run_binary(b, t, bi.op, {5, 7, 33}, {5, 1, 33})) o.push_back(std::move(x));
                   return o;
                 }});
  }
  c.push_back({"affine", F, [](const Backend& b, DType t) {
                 const std::int64_t n = 70001;
                 const Buffer x = random_buffer(t, n, -4.0f, 4.0f, 51);
                 Buffer y(t, n);
                 b.affine(x.data(), t, y.data(), t, n, 0.75f, -0.125f);
                 return Outs{close("y", std::move(y), 1e-30, kRound)};
               }});
  c.push_back({"fill", F, [](const Backend& b, DType t) {
                 Buffer y(t, 70001);
                 b.fill(y.data(), t, 70001, 0.3f);
                 return Outs{exact("y", std::move(y))};
               }});
  c.push_back({"copy_transposed", F, [](const Backend& b, DType t) {
                 const std::vector<std::int64_t> shape{37, 129}, in_strides{1, 37}, out_strides{129, 1};
                 const Buffer x = random_buffer(t, 37 * 129, -4.0f, 4.0f, 52);
                 Buffer y(DType::f32, 37 * 129);
                 b.copy(shape, {x.data(), t, in_strides}, {y.data(), DType::f32, out_strides});
                 return Outs{exact("y", std::move(y))};
               }});
  const DType all[] = {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2};
  for (DType from : all) {
    for (DType to : all) {
      if (from == to) continue;
      c.push_back({std::string("convert_") + name(from) + "_to_" + name(to), {DType::f32},
                   [from, to](const Backend& b, DType) { return run_convert(b, from, to); }});
    }
  }
  for (DType to : {DType::bf16, DType::f16}) {
    c.push_back({std::string("convert_stochastic_f32_to_") + name(to), {DType::f32},
                 [to](const Backend& b, DType) {
                   Outs o = run_convert_stochastic(b, to, 0);
                   for (Out& x : run_convert_stochastic(b, to, 7)) o.push_back(std::move(x));
                   return o;
                 }});
  }
  // Philox streams: raw bits at an odd offset (a block boundary inside), and uniform tensors in
  // every dtype (fp8 too) over a shifted range, above the parallel threshold with a tail.
  c.push_back({"random_bits", {DType::f32}, [](const Backend& b, DType) {
                 const std::int64_t n = 70001;
                 Buffer bits(DType::f32, n);
                 b.random_bits(99, 6, static_cast<std::uint32_t*>(bits.data()), static_cast<std::size_t>(n));
                 return Outs{exact("bits", std::move(bits))};
               }});
  for (DType to : all) {
    c.push_back({std::string("random_uniform_") + name(to), {DType::f32}, [to](const Backend& b, DType) {
                   const std::int64_t n = 70001;
                   Buffer y(DType::f32, n);  // storage size <= 4 bytes per element
                   b.random_uniform(y.data(), to, n, 7, 3, -2.5f, 4.0f);
                   return Outs{exact("y bits", bits_of(y, to, n))};
                 }});
  }
  // Running sums: 37 rows of 1029 (threaded, a tail) and one long row of 70001, both ways.
  c.push_back({"cumsum", F, [](const Backend& b, DType t) {
                 Outs o;
                 for (bool reverse : {false, true}) {
                   const Buffer x = random_buffer(t, 37 * 1029, -2.0f, 2.0f, reverse ? 71 : 70);
                   Buffer y(t, 37 * 1029);
                   b.cumsum(x.data(), t, 37, 1029, y.data(), t, reverse);
                   o.push_back(exact(reverse ? "rows reverse" : "rows", std::move(y)));
                   const Buffer x2 = random_buffer(t, 70001, -1.0f, 1.0f, reverse ? 73 : 72);
                   Buffer y2(DType::f32, 70001);
                   b.cumsum(x2.data(), t, 1, 70001, y2.data(), DType::f32, reverse);
                   o.push_back(exact(reverse ? "long reverse" : "long", std::move(y2)));
                 }
                 return o;
               }});
  // EMA of weights: a parameter of each float dtype into an f32 shadow, threaded with a tail.
  c.push_back({"ema_update", F, [](const Backend& b, DType t) {
                 const std::int64_t n = 70001;
                 const Buffer p = random_buffer(t, n, -3.0f, 3.0f, 80);
                 Buffer shadow = random_buffer(DType::f32, n, -3.0f, 3.0f, 81);
                 b.ema_update(p.data(), t, static_cast<float*>(shadow.data()), n, 0.001f);
                 return Outs{exact("shadow", std::move(shadow))};
               }});
  // fp8 recipes: a saturating scaled cast of each float dtype to each format (threaded, a tail,
  // values beyond the range at scale 2^4, one NaN and one Inf in the second run), its amax, an
  // amax-only pass; then scale updates over a history of 5 (push, window, margin, zero amax kept,
  // NaN reported).
  c.push_back({"fp8_scaled_cast", F, [](const Backend& b, DType t) {
                 Outs o;
                 for (DType fmt : {DType::f8e4m3, DType::f8e5m2}) {
                   for (bool special : {false, true}) {
                     const std::int64_t n = 70001;
                     Buffer x = random_buffer(t, n, -6000.0f, 6000.0f, special ? 91 : 90);
                     if (special) {
                       x.set(n - 2, NAN);
                       x.set(17, -INFINITY);
                     }
                     Buffer y(DType::f32, n);  // n fp8 bytes at the start
                     Buffer scale_amax(DType::f32, 3);
                     scale_amax.set(0, 16.0f);
                     scale_amax.set(1, -1.0f);
                     scale_amax.set(2, -1.0f);
                     auto* sa = static_cast<float*>(scale_amax.data());
                     b.fp8_scaled_cast(x.data(), t, y.data(), fmt, n, sa, sa + 1);
                     b.fp8_scaled_cast(x.data(), t, nullptr, fmt, n, nullptr, sa + 2);
                     const std::string tag = std::string(name(fmt)) + (special ? " nan/inf " : " ");
                     o.push_back(exact(tag + "y bits", bits_of(y, fmt, n)));
                     o.push_back(exact(tag + "scale, amax, amax-only", std::move(scale_amax)));
                   }
                 }
                 return o;
               }});
  // The cast-transpose on a shape of partial tiles and on one above the parallel threshold,
  // with y and with y null, NaN and -Inf in the second format's run.
  c.push_back({"fp8_scaled_cast_transpose", F, [](const Backend& b, DType t) {
                 Outs o;
                 const std::int64_t shapes[][2] = {{130, 67}, {300, 257}};
                 for (DType fmt : {DType::f8e4m3, DType::f8e5m2}) {
                   for (const auto& [rows, cols] : shapes) {
                     const std::int64_t n = rows * cols;
                     const bool special = fmt == DType::f8e5m2;
                     Buffer x = random_buffer(t, n, -6000.0f, 6000.0f, special ? 93 : 92);
                     if (special) {
                       x.set(n - 2, NAN);
                       x.set(cols + 3, -INFINITY);
                     }
                     Buffer y(DType::f32, n), yt(DType::f32, n), yt_only(DType::f32, n);
                     Buffer scale_amax(DType::f32, 3);  // scale, amax, amax with y null
                     scale_amax.set(0, 0.5f);
                     scale_amax.set(1, -1.0f);
                     scale_amax.set(2, -1.0f);
                     auto* sa = static_cast<float*>(scale_amax.data());
                     b.fp8_scaled_cast_transpose(x.data(), t, rows, cols, y.data(), yt.data(), fmt,
                                                 sa, sa + 1);
                     b.fp8_scaled_cast_transpose(x.data(), t, rows, cols, nullptr, yt_only.data(),
                                                 fmt, sa, sa + 2);
                     const std::string tag = std::string(name(fmt)) + " " + std::to_string(rows) +
                                             "x" + std::to_string(cols) + " ";
                     o.push_back(exact(tag + "y bits", bits_of(y, fmt, n)));
                     o.push_back(exact(tag + "yt bits", bits_of(yt, fmt, n)));
                     o.push_back(exact(tag + "yt bits, y null", bits_of(yt_only, fmt, n)));
                     o.push_back(exact(tag + "scale, amax, amax with y null", std::move(scale_amax)));
                   }
                 }
                 return o;
               }});
  c.push_back({"fp8_scale_update", {DType::f32}, [](const Backend& b, DType) {
                 Outs o;
                 for (DType fmt : {DType::f8e4m3, DType::f8e5m2}) {
                   Buffer history(DType::f32, 5);
                   for (int i = 0; i < 5; ++i) history.set(i, 0.0f);
                   Buffer state(DType::f32, 3);  // amax, scale, found_inf
                   state.set(1, 1.0f);
                   state.set(2, 0.0f);
                   auto* st = static_cast<float*>(state.data());
                   const float amaxes[] = {0.0f, 3.5f, 1e-3f, NAN, 700.0f, 2e-30f, INFINITY, 5.0f};
                   for (std::size_t k = 0; k < std::size(amaxes); ++k) {
                     state.set(0, amaxes[k]);
                     b.fp8_scale_update(static_cast<float*>(history.data()), 5, st, st + 1, fmt,
                                        static_cast<int>(k % 3), st + 2);
                     const std::string tag = std::string(name(fmt)) + " step " + std::to_string(k);
                     o.push_back(exact(tag + " history", history));
                     o.push_back(exact(tag + " amax, scale, found_inf", state));
                   }
                 }
                 return o;
               }});
  // The fp8 GEMM, C of each float dtype: E4M3 x E4M3 (forward), E5M2 x E4M3 and E4M3 x E5M2
  // (backward) at power-of-two scales, on a shape fp8 Tensor Cores take (k a multiple of 16)
  // and on one they do not (our kernel on a GPU), one NaN operand in the second.
  c.push_back({"fp8_gemm", F, [](const Backend& b, DType t) {
                 Outs o;
                 const std::pair<DType, DType> formats[] = {{DType::f8e4m3, DType::f8e4m3},
                                                            {DType::f8e5m2, DType::f8e4m3},
                                                            {DType::f8e4m3, DType::f8e5m2}};
                 const std::int64_t shapes[][3] = {{33, 40, 96}, {5, 7, 19}};
                 for (const auto& [fa, fb] : formats) {
                   for (const auto& s : shapes) {
                     Fp8GemmDesc d;
                     d.m = s[0], d.n = s[1], d.k = s[2];
                     d.a_dtype = fa, d.b_dtype = fb, d.c_dtype = t;
                     Buffer qa = random_any(fa, d.m * d.k, -200.0f, 200.0f, 95);
                     const Buffer qb = random_any(fb, d.n * d.k, -300.0f, 300.0f, 96);
                     if (d.k == 19) static_cast<std::uint8_t*>(qa.data())[3] = 0x7f;  // NaN in both formats
                     Buffer scales(DType::f32, 2);
                     scales.set(0, 32.0f);
                     scales.set(1, 0.25f);
                     const auto* sc = static_cast<const float*>(scales.data());
                     Buffer out(t, d.m * d.n);
                     b.fp8_gemm(d, qa.data(), sc, qb.data(), sc + 1, nullptr, out.data());
                     // |a| <= 200/32, |b| <= 300*4: f32 sums of k such products
                     const double bound = static_cast<double>(d.k) * (200.0 / 32) * 1200.0;
                     o.push_back(close(std::string(name(fa)) + "x" + name(fb) + " k=" +
                                           std::to_string(d.k),
                                       std::move(out), bound * 1.2e-7 * 2, kRound));
                     // The same with an f32 bias joining the sums (the fp8 Linear's forward).
                     if (fa == DType::f8e4m3 && fb == DType::f8e4m3) {
                       const Buffer bias = random_buffer(DType::f32, d.n, -50.0f, 50.0f, 97);
                       Fp8GemmDesc biased = d;
                       biased.has_bias = true;
                       Buffer with_bias(t, d.m * d.n);
                       b.fp8_gemm(biased, qa.data(), sc, qb.data(), sc + 1, bias.data(),
                                  with_bias.data());
                       o.push_back(close("bias k=" + std::to_string(d.k), std::move(with_bias),
                                         (bound + 50.0) * 1.2e-7 * 2, kRound));
                     }
                   }
                 }
                 return o;
               }});
  struct R { ReduceOp op; const char* name; };
  const R reduce_ops[] = {{ReduceOp::sum, "sum"},   {ReduceOp::mean, "mean"}, {ReduceOp::max, "max"},
                          {ReduceOp::min, "min"},   {ReduceOp::amax, "amax"}, {ReduceOp::norm1, "norm1"},
                          {ReduceOp::norm2, "norm2"}};
  for (const R& r : reduce_ops) {
    c.push_back({std::string("reduce_") + r.name, F, [r](const Backend& b, DType t) {
                   Outs o = run_reduce(b, t, r.op, 1, 70001, 1);      // one long row (threads)
                   // few outputs over long rows and columns (cuda: rows split in chunks)
                   for (Out& x : run_reduce(b, t, r.op, 1, 40000, 3)) o.push_back(std::move(x));
                   for (Out& x : run_reduce(b, t, r.op, 13, 517, 1)) o.push_back(std::move(x));
                   for (Out& x : run_reduce(b, t, r.op, 3, 41, 67)) o.push_back(std::move(x));
                   return o;
                 }});
  }
  c.push_back({"reduce_batch", F, [reduce_ops](const Backend& b, DType t) {
                 Outs o;
                 for (const R& r : reduce_ops) {
                   for (Out& x : run_reduce_batch(b, t, r.op)) {
                     x.what = std::string(r.name) + ": " + x.what;
                     o.push_back(std::move(x));
                   }
                 }
                 return o;
               }});
  for (bool log : {false, true}) {
    for (bool bwd : {false, true}) {
      c.push_back({std::string(log ? "log_softmax" : "softmax") + (bwd ? "_backward" : ""), F,
                   [log, bwd](const Backend& b, DType t) { return run_softmax(b, t, log, bwd); }});
    }
  }
  for (bool bwd : {false, true}) {
    c.push_back({std::string("cross_entropy") + (bwd ? "_backward" : ""), F,
                 [bwd](const Backend& b, DType t) {
                   Outs o = run_cross_entropy(b, t, bwd, 0.0f);
                   for (Out& x : run_cross_entropy(b, t, bwd, 0.1f)) o.push_back(std::move(x));
                   return o;
                 }});
    if (bwd) {
      c.push_back({"cross_entropy_fused", F, [](const Backend& b, DType t) {
                     Outs o;
                     for (float smoothing : {0.0f, 0.1f}) {
                       for (bool in_place : {false, true}) {
                         for (Out& x : run_cross_entropy_fused(b, t, smoothing, in_place, 33, 101)) {
                           o.push_back(std::move(x));
                         }
                       }
                     }
                     for (Out& x : run_cross_entropy_fused(b, t, 0.1f, true, 3, 1029)) {
                       o.push_back(std::move(x));
                     }
                     return o;
                   }});
      c.push_back({"rescale_unless_equal", F, run_rescale_unless_equal});
    }
    c.push_back({std::string(bwd ? "layer_norm_backward" : "layer_norm_forward"), F,
                 [bwd](const Backend& b, DType t) { return run_layer_norm(b, t, bwd); }});
  }
  c.push_back({"matmul", F, [](const Backend& b, DType t) {
                 Outs o;
                 for (bool ta : {false, true}) {
                   for (bool tb : {false, true}) {
                     for (Out& x : run_matmul(b, t, ta, tb, ta == tb)) o.push_back(std::move(x));
                   }
                 }
                 return o;
               }});
  add_optim_cases(c);
  add_transformer_cases(c);
  add_path_cases(c);
  add_matmul_gelu_cases(c);
  add_image_cases(c);
  // where: a bf16 condition with zeros, NaN and negative zero; Inf/NaN in both branches.
  c.push_back({"where", F, [](const Backend& b, DType t) {
                 const std::int64_t n = 70001;
                 Buffer cond = random_buffer(DType::bf16, n, -1.0f, 1.0f, 66);
                 for (std::int64_t i = 0; i < n; i += 3) cond.set(i, 0.0f);
                 cond.set(1, NAN);
                 cond.set(4, -0.0f);
                 Buffer x = random_buffer(t, n, -4.0f, 4.0f, 67), y = random_buffer(t, n, -4.0f, 4.0f, 68);
                 x.set(2, INFINITY);
                 y.set(5, NAN);
                 Buffer out(t, n);
                 b.where(n, cond.data(), DType::bf16, x.data(), y.data(), t, out.data());
                 return Outs{exact("y", std::move(out))};
               }});
  return c;
}

void compare(const Outs& got, const Outs& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::string what = where + " output " + std::to_string(i) + " (" + want[i].what + ")";
    if (want[i].exact) {
      ktest::expect_bitwise(got[i].buf, want[i].buf, what);
    } else if (!want[i].atol_each.empty()) {
      const Out& w = want[i];
      const double e = ktest::eps(w.buf.dtype());
      ktest::expect_close(got[i].buf, w.buf, [&](std::int64_t j) {
        return w.atol + w.atol_each[static_cast<std::size_t>(j)] + std::fabs(w.buf.get(j)) * w.k * e;
      }, what);
    } else {
      ktest::expect_close(got[i].buf, want[i].buf, want[i].atol, want[i].k, what);
    }
  }
}

}  // namespace mixprec::kernels::conformance
