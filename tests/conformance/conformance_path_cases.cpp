// Conformance cases that steer a device backend down each of its internal paths, so each path is
// checked against the reference (conformance_cases.h), and on a GPU against the other path:
//  - the memory-bound kernels' 16-byte path (cuda: src/kernels/cuda/vector_path.h) and their one
//    element per step: each kernel runs on buffers that start 16-byte aligned (on a device) and
//    on the same values one element further on, kN elements (not a multiple of the 8 a pack
//    holds). The aligned run's output is compared with the reference, and "mismatches" counts
//    the elements whose bits differ between the two runs: 0 on the reference, so 0 everywhere;
//  - layer_norm_backward's groups and chunks (cuda: a warp or a block per row, the column sums in
//    registers or in memory, chunks of rows that do not divide the rows), each with some of
//    weight, dx, dweight and dbias null.
#include <cstddef>
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
using ktest::random_buffer;

constexpr std::int64_t kN = 1029;  // 128 packs of 8, and 5 elements left over

/// Address of element i of buf, elements of `elem` bytes (fp8 data lives in f32-typed buffers).
void* at(Buffer& buf, std::int64_t i, std::size_t elem) {
  return static_cast<std::uint8_t*>(buf.data()) + static_cast<std::size_t>(i) * elem;
}
const void* at(const Buffer& buf, std::int64_t i, std::size_t elem) {
  return static_cast<const std::uint8_t*>(buf.data()) + static_cast<std::size_t>(i) * elem;
}

/// The kN elements of base placed `offset` elements into a buffer of kN + 1 (the rest zero).
Buffer placed(const Buffer& base, std::int64_t offset, std::size_t elem) {
  Buffer out(base.dtype(), kN + 1);
  std::memcpy(at(out, offset, elem), base.data(), static_cast<std::size_t>(kN) * elem);
  return out;
}
Buffer placed(const Buffer& base, std::int64_t offset) {
  return placed(base, offset, size_of(base.dtype()));
}

/// One kernel run at element offset 0 (aligned) and 1 (misaligned): `run(offset)` returns its
/// output, kN elements of `elem` bytes from that offset. The aligned output matches the reference
/// as `how` says; the elements whose bits differ between the runs are counted, exactly.
template <class Run>
Outs aligned_and_shifted(const std::string& what, Run run, std::size_t elem,
                         Out (*how)(std::string, Buffer)) {
  Buffer aligned = run(0);
  const Buffer shifted = run(1);
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < kN; ++i) {
    differ += std::memcmp(at(aligned, i, elem), at(shifted, i + 1, elem), elem) != 0 ? 1 : 0;
  }
  Buffer count(DType::f32, 1);
  count.set(0, static_cast<float>(differ));
  return {how(what, std::move(aligned)), exact(what + " mismatches", std::move(count))};
}

Out exact_out(std::string what, Buffer b) { return exact(std::move(what), std::move(b)); }
Out transcendental_out(std::string what, Buffer b) {
  return close(std::move(what), std::move(b), 1e-30, kTranscendental);
}
/// Within run_unary_backward's tolerance for a gradient that recomputes a transcendental.
Out gradient_ulps_out(std::string what, Buffer b) {
  return close(std::move(what), std::move(b), 8 * 1.1920928955078125e-07, kTranscendental);
}

void append(Outs& to, Outs more) {
  for (Out& o : more) to.push_back(std::move(o));
}

const std::vector<std::int64_t> kShape{kN}, kStrides{1};

Outs run_unary_paths(const Backend& b, DType t) {
  Outs o;
  for (const UnaryOpInfo& u : kUnaryOps) {
    const Buffer x = random_buffer(t, kN, u.lo, u.hi, 70);
    append(o, aligned_and_shifted(
                  u.name,
                  [&](std::int64_t off) {
                    const Buffer xs = placed(x, off);
                    Buffer y(t, kN + 1);
                    b.unary(u.op, kShape, {at(xs, off, size_of(t)), t, kStrides},
                            at(y, off, size_of(t)), t);
                    return y;
                  },
                  size_of(t), u.simd_ulps == 0.0 ? exact_out : transcendental_out));
  }
  return o;
}

/// a in t, b in f32, out in t: the dtypes differ, so each operand's own alignment counts.
Outs run_binary_paths(const Backend& b, DType t) {
  Outs o;
  const Buffer x = random_buffer(t, kN, 0.5f, 4.0f, 71);
  const Buffer y = random_buffer(DType::f32, kN, 0.5f, 4.0f, 72);
  for (BinaryOp op : kBinaryOps) {
    append(o, aligned_and_shifted(
                  name(op),
                  [&](std::int64_t off) {
                    const Buffer xs = placed(x, off), ys = placed(y, off);
                    Buffer out(t, kN + 1);
                    b.binary(op, kShape, {at(xs, off, size_of(t)), t, kStrides},
                             {at(ys, off, 4), DType::f32, kStrides}, at(out, off, size_of(t)), t);
                    return out;
                  },
                  size_of(t), op == BinaryOp::pow ? transcendental_out : exact_out));
  }
  return o;
}

Outs run_unary_backward_paths(const Backend& b, DType t) {
  Outs o;
  for (const UnaryOpInfo& u : kUnaryOps) {
    const Buffer x = random_buffer(t, kN, u.lo, u.hi, 73);
    Buffer y(t, kN);
    ref::unary(u.op, kShape, {x.data(), t, kStrides}, y.data(), t);  // the forward's output
    const Buffer dy = random_buffer(t, kN, -1.0f, 1.0f, 74);
    append(o, aligned_and_shifted(
                  u.name,
                  [&](std::int64_t off) {
                    const std::size_t e = size_of(t);
                    const Buffer xs = placed(x, off), ys = placed(y, off), dys = placed(dy, off);
                    Buffer dx(t, kN + 1);
                    b.unary_backward(u.op, at(xs, off, e), t, at(ys, off, e), t,
                                     at(dys, off, e), t, at(dx, off, e), t, kN);
                    return dx;
                  },
                  size_of(t), u.grad_exact ? transcendental_out : gradient_ulps_out));
  }
  return o;
}

/// in t, out f32.
Outs run_affine_paths(const Backend& b, DType t) {
  const Buffer x = random_buffer(t, kN, -4.0f, 4.0f, 75);
  return aligned_and_shifted(
      "y",
      [&](std::int64_t off) {
        const Buffer xs = placed(x, off);
        Buffer y(DType::f32, kN + 1);
        b.affine(at(xs, off, size_of(t)), t, at(y, off, 4), DType::f32, kN, 0.75f, -0.125f);
        return y;
      },
      4, [](std::string what, Buffer buf) {
        return close(std::move(what), std::move(buf), 1e-30, kRound);
      });
}

Outs run_fill_paths(const Backend& b, DType t) {
  return aligned_and_shifted(
      "y",
      [&](std::int64_t off) {
        Buffer y(t, kN + 1);
        b.fill(at(y, off, size_of(t)), t, kN, 0.3f);
        return y;
      },
      size_of(t), exact_out);
}

/// Conversions between dtypes (fp8 included: its bytes live in f32-typed buffers), and
/// contiguous copies, which convert as they go.
Outs run_convert_paths(const Backend& b, bool through_copy) {
  Outs o;
  const std::pair<DType, DType> pairs[] = {
      {DType::f32, DType::bf16},   {DType::bf16, DType::f32},   {DType::f16, DType::bf16},
      {DType::f8e4m3, DType::f32}, {DType::f32, DType::f8e5m2}, {DType::f8e5m2, DType::f8e5m2}};
  for (const auto& [from, to] : pairs) {
    if (!through_copy && from == to) continue;  // convert's same-dtype move is a byte copy
    const std::size_t es = size_of(from), ed = size_of(to);
    // Source values rounded to `from` by the reference (f32 buffers hold fp8 bytes).
    const Buffer f = random_buffer(DType::f32, kN, -300.0f, 300.0f, 76);
    Buffer src(is_storage_only(from) ? DType::f32 : from, kN);
    ref::convert(f.data(), DType::f32, src.data(), from, static_cast<std::size_t>(kN));
    const DType dst_buffer = is_storage_only(to) ? DType::f32 : to;
    append(o, aligned_and_shifted(
                  std::string(name(from)) + " to " + name(to),
                  [&](std::int64_t off) {
                    const Buffer s = placed(src, off, es);
                    Buffer d(dst_buffer, kN + 1);
                    if (through_copy) {
                      b.copy(kShape, {at(s, off, es), from, kStrides},
                             {at(d, off, ed), to, kStrides});
                    } else {
                      b.convert(at(s, off, es), from, at(d, off, ed), to,
                                static_cast<std::size_t>(kN));
                    }
                    return d;
                  },
                  ed, exact_out));
  }
  return o;
}

/// layer_norm_backward on one shape; weight, dx, dweight and dbias each present or null.
struct LnShape {
  std::int64_t rows, cols;
  bool weight, dx, dweight, dbias;
};

Outs run_layer_norm_backward(const Backend& b, DType t, const LnShape& s) {
  const std::int64_t n = s.rows * s.cols;
  const Buffer x = random_buffer(t, n, -3.0f, 5.0f, 80);
  const Buffer w = random_buffer(DType::f32, s.cols, 0.5f, 1.5f, 81);
  const Buffer dy = random_buffer(t, n, -1.0f, 1.0f, 82);
  Buffer mean(DType::f32, s.rows), rstd(DType::f32, s.rows), y(t, n);
  const auto* wp = s.weight ? static_cast<const float*>(w.data()) : nullptr;
  ref::layer_norm_forward(x.data(), t, s.rows, s.cols, wp, nullptr, 1e-5f, y.data(), t,
                          static_cast<float*>(mean.data()), static_cast<float*>(rstd.data()));
  Buffer dx(t, n), dw(DType::f32, s.cols), db(DType::f32, s.cols);
  b.layer_norm_backward(x.data(), t, dy.data(), t, s.rows, s.cols,
                        static_cast<const float*>(mean.data()),
                        static_cast<const float*>(rstd.data()), wp, s.dx ? dx.data() : nullptr, t,
                        s.dweight ? static_cast<float*>(dw.data()) : nullptr,
                        s.dbias ? static_cast<float*>(db.data()) : nullptr);
  const std::string tag = std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                          (s.weight ? "" : " no weight") + ": ";
  Outs o;
  if (s.dx) o.push_back(close(tag + "dx", std::move(dx), 1e-4, 8.0));
  if (s.dweight) o.push_back(close(tag + "dweight", std::move(dw), 1e-4, 8.0));
  if (s.dbias) o.push_back(close(tag + "dbias", std::move(db), 1e-4, 8.0));
  return o;
}

}  // namespace

void add_path_cases(std::vector<Case>& c) {
  const auto F = all_float();
  c.push_back({"unary_vector_path", F, run_unary_paths});
  c.push_back({"binary_vector_path", F, run_binary_paths});
  c.push_back({"unary_backward_vector_path", F, run_unary_backward_paths});
  c.push_back({"affine_vector_path", F, run_affine_paths});
  c.push_back({"fill_vector_path", F, run_fill_paths});
  c.push_back({"convert_vector_path", {DType::f32},
               [](const Backend& b, DType) { return run_convert_paths(b, false); }});
  c.push_back({"copy_vector_path", {DType::f32},
               [](const Backend& b, DType) { return run_convert_paths(b, true); }});
  // Rows and columns that divide by nothing the kernels group by (8 per pack, 32 per warp, the
  // chunks' rows); on cuda the widths pick each group and register count, and 33001 rows of 8
  // hit the 512-chunk cap with empty chunks at the end.
  c.push_back({"layer_norm_backward_paths", F, [](const Backend& b, DType t) {
                 const LnShape shapes[] = {
                     {150, 100, false, true, false, true},  // warp rows; no weight, no dweight
                     {77, 33, true, false, true, true},     // dweight and dbias alone
                     {70, 1029, true, true, true, false},   // block rows, 3 chunks; no dbias
                     {40, 300, true, true, false, false},   // dx alone
                     {5, 4099, false, true, true, true},    // wider than the registers hold
                     {0, 40, true, true, true, true},       // no rows: zero sums
                     {33001, 8, true, true, true, true},    // many short rows
                 };
                 Outs o;
                 for (const LnShape& s : shapes) append(o, run_layer_norm_backward(b, t, s));
                 return o;
               }});
}

}  // namespace mixprec::kernels::conformance
