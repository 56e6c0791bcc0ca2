// Dispatching elementwise kernels: recognise the layouts the AVX-512 code covers (contiguous,
// scalar operand, row or column broadcast), split them across threads, and send everything else
// (other strides, other broadcasts, dtype mixes) to the reference.
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/elementwise_avx512.h"
#include "kernels/elementwise.h"

namespace mixprec::kernels {
namespace {

using avx512::VBinary;
using avx512::VUnary;

static_assert(static_cast<int>(DType::f32) == 0 && static_cast<int>(DType::bf16) == 1 &&
              static_cast<int>(DType::f16) == 2);
static_assert(static_cast<int>(UnaryOp::neg) == static_cast<int>(VUnary::neg) &&
              static_cast<int>(UnaryOp::relu) == static_cast<int>(VUnary::relu) &&
              static_cast<int>(UnaryOp::sigmoid) == static_cast<int>(VUnary::sigmoid));
static_assert(static_cast<int>(BinaryOp::add) == static_cast<int>(VBinary::add) &&
              static_cast<int>(BinaryOp::minimum) == static_cast<int>(VBinary::minimum));

constexpr std::int64_t kChunk = 16384;  // elements per parallel task (a multiple of 16)

int code(DType t) { return static_cast<int>(t); }

/// The shape and strides of the operands after dropping size-1 dimensions and merging each
/// dimension into its outer neighbour where every operand is contiguous across the two.
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

/// Whether the backward formula of op reads the forward input x (else the output y); must
/// agree with the reference (tests pass null for the operand that is not read).
bool grad_reads_x(UnaryOp op) {
  switch (op) {
    case UnaryOp::abs: case UnaryOp::log: case UnaryOp::square: case UnaryOp::relu:
    case UnaryOp::gelu:
      return true;
    default:
      return false;
  }
}

}  // namespace

const char* name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::abs: return "abs";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::reciprocal: return "reciprocal";
    case UnaryOp::square: return "square";
    case UnaryOp::relu: return "relu";
    case UnaryOp::gelu: return "gelu";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sigmoid: return "sigmoid";
  }
  return "?";
}

const char* name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
  }
  return "?";
}

namespace cpu {
void unary(UnaryOp op, std::span<const std::int64_t> shape, const StridedInput& in, void* out,
           DType out_dtype) {
  const std::int64_t n = checked_numel(name(op), shape, in.strides, in.strides);
  std::string why_not = cpu::avx512_unavailable_reason();
  if (why_not.empty()) {
    const Collapsed c = collapse(shape, in.strides, {}, 1);
    if (!(c.shape.size() == 0 || (c.shape.size() == 1 && c.strides[0][0] == 1))) {
      why_not = "avx512: input not contiguous";
    } else if (!cpu::avx512_dtype_pair(in.dtype, out_dtype)) {
      why_not = "avx512: dtype pair not vectorised";
    }
  }
  cpu::log_impl(name(op), cpu::dtype_label(in.dtype, out_dtype), why_not.empty(), why_not);
  if (!why_not.empty()) return ref::unary(op, shape, in, out, out_dtype);
  cpu::parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    avx512::unary(static_cast<VUnary>(op), cpu::at(in.data, in.dtype, begin), code(in.dtype),
                  cpu::at(out, out_dtype, begin), code(out_dtype), len);
  });
}

void binary(BinaryOp op, std::span<const std::int64_t> shape, const StridedInput& a,
            const StridedInput& b, void* out, DType out_dtype) {
  const std::int64_t n = checked_numel(name(op), shape, a.strides, b.strides);
  require_compute_dtype(name(op), a.dtype);  // a scalar side is loaded inside parallel loops
  require_compute_dtype(name(op), b.dtype);
  const VBinary vop = static_cast<VBinary>(op);
  std::string why_not = cpu::avx512_unavailable_reason();
  // The vector plan: a contiguous run of `inner` elements per row, for `rows` rows; each side
  // is either a contiguous row (row_stride elements apart; 0 = the same row every time) or a
  // scalar per row (scalar_stride apart).
  enum class Side { vector, scalar };
  Side side[2] = {Side::vector, Side::vector};
  std::int64_t rows = 1, inner = n, step[2] = {inner, inner};
  if (why_not.empty()) {
    const Collapsed c = collapse(shape, a.strides, b.strides, 2);
    const std::size_t rank = c.shape.size();
    bool ok = rank <= 2;
    if (ok && rank >= 1) {
      inner = c.shape[rank - 1];
      rows = rank == 2 ? c.shape[0] : 1;
      for (int k = 0; k < 2; ++k) {
        const std::int64_t si = c.strides[k][rank - 1];
        const std::int64_t so = rank == 2 ? c.strides[k][0] : 0;
        if (si == 1 && (so == inner || so == 0)) {
          side[k] = Side::vector;
          step[k] = so;
        } else if (si == 0) {
          side[k] = Side::scalar;
          step[k] = so;
        } else {
          ok = false;
        }
      }
      ok = ok && !(side[0] == Side::scalar && side[1] == Side::scalar);
    } else if (ok) {  // a single element
      step[0] = step[1] = 0;
    }
    const bool vv = side[0] == Side::vector && side[1] == Side::vector;
    const DType vdtype = side[0] == Side::vector ? a.dtype : b.dtype;
    if (!ok) {
      why_not = "avx512: strides/broadcast not vectorised";
    } else if ((vv && a.dtype != b.dtype) || !cpu::avx512_dtype_pair(vdtype, out_dtype)) {
      why_not = "avx512: dtype combination not vectorised";
    }
  }
  cpu::log_impl(name(op), cpu::dtype_label(a.dtype, out_dtype), why_not.empty(), why_not);
  if (!why_not.empty()) return ref::binary(op, shape, a, b, out, out_dtype);
  if (n == 0) return;

  auto run_rows = [&](std::int64_t r, std::int64_t begin, std::int64_t len) {
    void* o = cpu::at(out, out_dtype, r * inner + begin);
    if (side[0] == Side::vector && side[1] == Side::vector) {
      avx512::binary_vv(vop, cpu::at(a.data, a.dtype, r * step[0] + begin),
                        cpu::at(b.data, b.dtype, r * step[1] + begin), code(a.dtype), o,
                        code(out_dtype), len);
    } else if (side[1] == Side::scalar) {
      const float s = cpu::load_f32(b.data, b.dtype, r * step[1]);
      avx512::binary_vs(vop, cpu::at(a.data, a.dtype, r * step[0] + begin), code(a.dtype), s,
                        false, o, code(out_dtype), len);
    } else {
      const float s = cpu::load_f32(a.data, a.dtype, r * step[0]);
      avx512::binary_vs(vop, cpu::at(b.data, b.dtype, r * step[1] + begin), code(b.dtype), s,
                        true, o, code(out_dtype), len);
    }
  };
  if (rows == 1) {
    cpu::parallel_chunks(inner, kChunk, [&](std::int64_t begin, std::int64_t len) {
      run_rows(0, begin, len);
    });
  } else {
    cpu::parallel_for(rows, n >= cpu::kParallelMinWork,
                      [&](std::int64_t r) { run_rows(r, 0, inner); });
  }
}

void affine(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t n,
            float alpha, float beta) {
  MIXPREC_CHECK(n >= 0, ShapeError, "affine", "negative element count " << n);
  std::string why_not = cpu::avx512_unavailable_reason();
  if (why_not.empty() && !cpu::avx512_dtype_pair(in_dtype, out_dtype)) {
    why_not = "avx512: dtype pair not vectorised";
  }
  cpu::log_impl("affine", cpu::dtype_label(in_dtype, out_dtype), why_not.empty(), why_not);
  if (!why_not.empty()) return ref::affine(in, in_dtype, out, out_dtype, n, alpha, beta);
  cpu::parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    avx512::affine(cpu::at(in, in_dtype, begin), code(in_dtype), cpu::at(out, out_dtype, begin),
                   code(out_dtype), len, alpha, beta);
  });
}

void unary_backward(UnaryOp op, const void* x, DType x_dtype, const void* y, DType y_dtype,
                    const void* dy, DType dy_dtype, void* dx, DType dx_dtype, std::int64_t n) {
  const std::string op_name = std::string(name(op)) + "_backward";
  MIXPREC_CHECK(n >= 0, ShapeError, op_name.c_str(), "negative element count " << n);
  const bool use_x = grad_reads_x(op);
  const void* v = use_x ? x : y;
  const DType v_dtype = use_x ? x_dtype : y_dtype;
  if (v == nullptr && n > 0) {  // the reference reports the missing operand
    return ref::unary_backward(op, x, x_dtype, y, y_dtype, dy, dy_dtype, dx, dx_dtype, n);
  }
  std::string why_not = cpu::avx512_unavailable_reason();
  if (why_not.empty() && (v_dtype != dy_dtype || !cpu::avx512_dtype_pair(dy_dtype, dx_dtype))) {
    why_not = "avx512: dtype combination not vectorised";
  }
  cpu::log_impl(op_name, cpu::dtype_label(dy_dtype, dx_dtype), why_not.empty(), why_not);
  if (!why_not.empty()) {
    return ref::unary_backward(op, x, x_dtype, y, y_dtype, dy, dy_dtype, dx, dx_dtype, n);
  }
  cpu::parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    avx512::unary_backward(static_cast<VUnary>(op), cpu::at(v, v_dtype, begin),
                           cpu::at(dy, dy_dtype, begin), code(dy_dtype),
                           cpu::at(dx, dx_dtype, begin), code(dx_dtype), len);
  });
}

void fill(void* out, DType dtype, std::int64_t n, float value) {
  MIXPREC_CHECK(n >= 0, ShapeError, "fill", "negative element count " << n);
  require_compute_dtype("fill", dtype);  // the vector kernel knows dtype codes 0-2 only
  const std::string why_not = cpu::avx512_unavailable_reason();
  cpu::log_impl("fill", name(dtype), why_not.empty(), why_not);
  if (!why_not.empty()) return ref::fill(out, dtype, n, value);
  cpu::parallel_chunks(n, kChunk, [&](std::int64_t begin, std::int64_t len) {
    avx512::fill(cpu::at(out, dtype, begin), code(dtype), len, value);
  });
}
}  // namespace cpu

}  // namespace mixprec::kernels
