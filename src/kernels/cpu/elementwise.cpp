// Dispatching elementwise kernels (the cpu backend): argument checks, the layout plan, threads
// and the verbose log; the arithmetic is the Highway row kernels of elementwise_simd.cpp.
// Every strided/broadcast layout runs vectorised: the shapes are collapsed to rows of a
// contiguous, broadcast (stride 0) or strided last dimension; strided rows are gathered into
// a small contiguous block first. Only storage-only dtypes (fp8) are refused, as the
// reference refuses them (the entry point sends fp8 calls to the reference: cpu_backend.cpp).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/elementwise_simd.h"
#include "kernels/elementwise.h"

namespace mixprec::kernels {
namespace {

/// Direct calls with a storage-only (fp8) dtype: DTypeError naming op (through the backend
/// table they never get here: cpu_supports sends them to the reference, which refuses them).
void require_compute_dtypes(const char* op, std::initializer_list<DType> dtypes) {
  for (DType t : dtypes) require_compute_dtype(op, t);
}

/// Elements per parallel task: big enough to amortise a dispatch, small enough to balance.
constexpr std::int64_t kChunk = 16384;
/// Elements gathered at a time from a strided row (a stack buffer of 4 KiB per operand).
constexpr std::int64_t kGather = 1024;

/// The shape and strides of up to two operands after dropping size-1 dimensions and merging
/// each dimension into its outer neighbour where every operand is contiguous across the two.
struct Collapsed {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides[2];
};

Collapsed collapse(std::span<const std::int64_t> shape, std::span<const std::int64_t> s0,
                   std::span<const std::int64_t> s1, int operands) {
  Collapsed c;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const std::int64_t st[2] = {s0[d], operands > 1 ? s1[d] : 0};
    bool merge = !c.shape.empty();
    for (int k = 0; k < operands && merge; ++k) merge = c.strides[k].back() == st[k] * shape[d];
    if (merge) {
      c.shape.back() *= shape[d];
      for (int k = 0; k < operands; ++k) c.strides[k].back() = st[k];
    } else {
      c.shape.push_back(shape[d]);
      for (int k = 0; k < operands; ++k) c.strides[k].push_back(st[k]);
    }
  }
  return c;
}

std::int64_t checked_numel(const char* op, std::span<const std::int64_t> shape,
                           std::span<const std::int64_t> s0, std::span<const std::int64_t> s1) {
  MIXPREC_CHECK(s0.size() == shape.size() && s1.size() == shape.size(), ShapeError, op,
                "an operand has " << (s0.size() != shape.size() ? s0.size() : s1.size())
                                  << " strides for a rank-" << shape.size()
                                  << " shape; pass one stride per dimension");
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    MIXPREC_CHECK(d >= 0, ShapeError, op, "negative dimension " << d << " in shape");
    n *= d;
  }
  return n;
}

/// The rows of a collapsed layout: `rows` runs of `inner` elements; row r of operand k starts
/// at the offset of r's multi-index over outer_shape, and steps by inner_stride[k].
template <int K>
struct RowPlan {
  std::vector<std::int64_t> outer_shape;
  std::vector<std::int64_t> outer_strides[K];
  std::int64_t inner_stride[K] = {};
  std::int64_t rows = 1;
  std::int64_t inner = 1;

  explicit RowPlan(const Collapsed& c) {
    const std::size_t rank = c.shape.size();
    if (rank == 0) return;  // one element (or collapsed size-1 dims): a single row of one
    inner = c.shape[rank - 1];
    for (int k = 0; k < K; ++k) inner_stride[k] = c.strides[k][rank - 1];
    outer_shape.assign(c.shape.begin(), c.shape.end() - 1);
    for (int k = 0; k < K; ++k) outer_strides[k].assign(c.strides[k].begin(), c.strides[k].end() - 1);
    for (std::int64_t d : outer_shape) rows *= d;
  }

  /// Calls body(offsets, j0, j1) for each row segment [j0, j1) of the rows and columns a task
  /// covers, in parallel over tasks of about kChunk elements (fixed, so the split never depends
  /// on the thread count; each element's result does not depend on the split either).
  template <class Body>
  void run(Body&& body) const {
    const std::int64_t segs = inner > kChunk ? (inner + kChunk - 1) / kChunk : 1;
    const std::int64_t rows_per_task = inner > kChunk ? 1 : std::max<std::int64_t>(1, kChunk / std::max<std::int64_t>(inner, 1));
    const std::int64_t groups = (rows + rows_per_task - 1) / rows_per_task;
    parallel_for(groups * segs, rows * inner >= kParallelMinWork, [&](std::int64_t task) {
      const std::int64_t g = task / segs, s = task % segs;
      const std::int64_t r0 = g * rows_per_task, r1 = std::min(rows, r0 + rows_per_task);
      const std::int64_t j0 = segs == 1 ? 0 : s * kChunk;
      const std::int64_t j1 = segs == 1 ? inner : std::min(inner, j0 + kChunk);
      // The multi-index of row r0 and the operands' offsets there; then an odometer.
      const std::size_t rank = outer_shape.size();
      std::vector<std::int64_t> idx(rank, 0);
      std::int64_t off[K] = {};
      std::int64_t rem = r0;
      for (std::size_t d = rank; d-- > 0;) {
        idx[d] = rem % outer_shape[d];
        rem /= outer_shape[d];
        for (int k = 0; k < K; ++k) off[k] += idx[d] * outer_strides[k][d];
      }
      for (std::int64_t r = r0; r < r1; ++r) {
        body(r, off, j0, j1);
        for (std::size_t d = rank; d-- > 0;) {
          for (int k = 0; k < K; ++k) off[k] += outer_strides[k][d];
          if (++idx[d] < outer_shape[d]) break;
          for (int k = 0; k < K; ++k) off[k] -= outer_strides[k][d] * outer_shape[d];
          idx[d] = 0;
        }
      }
    });
  }
};

/// Copies m elements of dtype dt starting at src with a stride (in elements) into dst.
void gather(const void* src, DType dt, std::int64_t stride, std::int64_t m, void* dst) {
  const std::size_t es = size_of(dt);
  const char* s = static_cast<const char*>(src);
  char* o = static_cast<char*>(dst);
  for (std::int64_t j = 0; j < m; ++j) {
    std::memcpy(o + static_cast<std::size_t>(j) * es, s + j * stride * static_cast<std::int64_t>(es), es);
  }
}

}  // namespace

namespace cpu {
void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype) {
  const std::int64_t n = checked_numel(name(op), shape, in.strides, in.strides);
  const std::string label = dtype_label(in.dtype, out_dtype);
  require_compute_dtypes(name(op), {in.dtype, out_dtype});
  log_simd(name(op), label);
  if (n == 0) return;
  const RowPlan<1> plan(collapse(shape, in.strides, {}, 1));
  plan.run([&](std::int64_t r, const std::int64_t* off, std::int64_t j0, std::int64_t j1) {
    const std::int64_t s = plan.inner_stride[0];
    void* o = at(out, out_dtype, r * plan.inner + j0);
    const void* src = at(in.data, in.dtype, off[0] + j0 * s);
    if (s == 1 || j1 - j0 == 1) return unary_row(op, src, in.dtype, o, out_dtype, j1 - j0);
    alignas(64) unsigned char buf[kGather * 4];
    for (std::int64_t j = 0; j < j1 - j0; j += kGather) {
      const std::int64_t m = std::min(kGather, j1 - j0 - j);
      gather(at(src, in.dtype, j * s), in.dtype, s, m, buf);
      unary_row(op, buf, in.dtype, at(o, out_dtype, j), out_dtype, m);
    }
  });
}

void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype) {
  const std::int64_t n = checked_numel(name(op), shape, a.strides, b.strides);
  const std::string label = dtype_label(a.dtype, out_dtype);
  require_compute_dtypes(name(op), {a.dtype, b.dtype, out_dtype});
  log_simd(name(op), label);
  if (n == 0) return;
  const RowPlan<2> plan(collapse(shape, a.strides, b.strides, 2));
  const StridedInput* src[2] = {&a, &b};
  plan.run([&](std::int64_t r, const std::int64_t* off, std::int64_t j0, std::int64_t j1) {
    void* o = at(out, out_dtype, r * plan.inner + j0);
    const std::int64_t len = j1 - j0;
    // Each side: a contiguous run (stride 1), one broadcast value (stride 0) or a strided run
    // to gather. With both sides broadcast, a is materialised so that one side is a run.
    const void* p[2];
    std::int64_t s[2];
    for (int k = 0; k < 2; ++k) {
      s[k] = len == 1 ? 1 : plan.inner_stride[k];
      p[k] = at(src[k]->data, src[k]->dtype, off[k] + j0 * plan.inner_stride[k]);
    }
    ScalarSide side = ScalarSide::none;
    float scalar = 0.0f;
    if (s[1] == 0) {
      side = ScalarSide::b;
      scalar = load_f32(p[1], b.dtype, 0);
    } else if (s[0] == 0) {
      side = ScalarSide::a;
      scalar = load_f32(p[0], a.dtype, 0);
    }
    if (s[0] == 0 && s[1] == 0) s[0] = -1;  // gather (broadcast-fill) a, keep b as the scalar
    const bool gather_a = s[0] != 1 && side != ScalarSide::a;
    const bool gather_b = s[1] != 1 && side != ScalarSide::b;
    if (!gather_a && !gather_b) {
      return binary_row(op, p[0], a.dtype, p[1], b.dtype, side, scalar, o, out_dtype, len);
    }
    alignas(64) unsigned char buf[2][kGather * 4];
    for (std::int64_t j = 0; j < len; j += kGather) {
      const std::int64_t m = std::min(kGather, len - j);
      const void* q[2];
      for (int k = 0; k < 2; ++k) {
        const bool g = k == 0 ? gather_a : gather_b;
        const std::int64_t st = s[k] == -1 ? 0 : s[k];
        if (g) {
          gather(at(p[k], src[k]->dtype, j * st), src[k]->dtype, st, m, buf[k]);
          q[k] = buf[k];
        } else {
          q[k] = s[k] == 1 ? at(p[k], src[k]->dtype, j) : p[k];
        }
      }
      binary_row(op, q[0], a.dtype, q[1], b.dtype, side, scalar, at(o, out_dtype, j), out_dtype,
                 m);
    }
  });
}

void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta) {
  MIXPREC_CHECK(n >= 0, ShapeError, "affine", "negative element count " << n);
  const std::string label = dtype_label(in_dtype, out_dtype);
  require_compute_dtypes("affine", {in_dtype, out_dtype});
  log_simd("affine", label);
  parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    affine_row(at(in, in_dtype, begin), in_dtype, at(out, out_dtype, begin), out_dtype, len,
               alpha, beta);
  });
}

void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n) {
  const std::string op_name = std::string(name(op)) + "_backward";
  MIXPREC_CHECK(n >= 0, ShapeError, op_name.c_str(), "negative element count " << n);
  const bool use_x = grad_reads_x(op);
  const void* v = use_x ? x : y;
  const DType v_dtype = use_x ? x_dtype : y_dtype;
  const std::string label = dtype_label(dy_dtype, dx_dtype);
  if (v == nullptr && n > 0) {  // the reference reports the missing operand
    return ref::unary_backward(op, x, x_dtype, y, y_dtype, dy, dy_dtype, dx, dx_dtype, n);
  }
  require_compute_dtypes(op_name.c_str(), {v_dtype, dy_dtype, dx_dtype});
  log_simd(op_name, label);
  parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    unary_backward_row(op, at(v, v_dtype, begin), v_dtype, at(dy, dy_dtype, begin), dy_dtype,
                       at(dx, dx_dtype, begin), dx_dtype, len);
  });
}

void fill(void* out, DType dtype, std::int64_t n, float value) {
  MIXPREC_CHECK(n >= 0, ShapeError, "fill", "negative element count " << n);
  require_compute_dtypes("fill", {dtype});
  log_simd("fill", name(dtype));
  parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    fill_row(at(out, dtype, begin), dtype, len, value);
  });
}
}  // namespace cpu

}  // namespace mixprec::kernels
