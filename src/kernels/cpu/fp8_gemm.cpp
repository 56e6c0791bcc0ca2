// The fp8 GEMM on the cpu: the emulation of an fp8 Tensor Core's product, exact. Each operand
// is decoded once into an f32 copy (a 256-entry table of decode(q) / scale per operand: every
// value exact, fp8_scale_math.h's operand_value), then oneDNN's f32 GEMM multiplies the copies
// (exact products, f32 accumulation) and a 16-bit C gets its one rounding by the conversion
// kernel (a bias joins the f32 sums in oneDNN's epilogue first). No CPU has fp8 dot products, and f32 copies of k-contiguous operands are what
// oneDNN's GEMM reads fastest; the copies are per-thread buffers that only grow.
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/dispatch_util.h"
#include "kernels/cpu/growing_buffer.h"
#include "kernels/convert.h"
#include "kernels/fp8_gemm.h"
#include "kernels/spec/fp8_scale_math.h"
#include "kernels/matmul.h"

namespace mixprec::kernels::cpu {
namespace {

/// Elements per decoding chunk (256 KiB of f32 written per chunk).
constexpr std::int64_t kChunk = 65536;

/// out[i] = decode(q[i]) / scale for count elements, split over the threads.
void decode_operand(const void* q, DType t, std::int64_t count, float scale, float* out) {
  std::array<float, 256> table{};
  const float inv = 1.0f / scale;
  for (unsigned b = 0; b < 256; ++b) {
    table[b] = fp8_math::operand_value(static_cast<std::uint8_t>(b), t == DType::f8e4m3, inv);
  }
  const auto* bits = static_cast<const std::uint8_t*>(q);
  parallel_chunks(count, kChunk, [&](std::int64_t begin, std::int64_t len) {
    for (std::int64_t i = begin; i < begin + len; ++i) out[i] = table[bits[i]];
  });
}

}  // namespace

void fp8_gemm(const Fp8GemmDesc& d, const void* a, const float* a_scale, const void* b,
              const float* b_scale, const void* bias, void* c) {
  validate_fp8_gemm(d, a, a_scale, b, b_scale, bias, c);
  if (d.m == 0 || d.n == 0) return;
  log_simd("fp8_gemm", dtype_label(d.a_dtype, d.b_dtype));
  thread_local GrowingBuffer a32, b32, c32, bias32;
  const bool empty = d.k == 0;
  float* av = a32.get(static_cast<std::size_t>(d.m * d.k) + 1);
  float* bv = b32.get(static_cast<std::size_t>(d.n * d.k) + 1);
  if (!empty) {
    decode_operand(a, d.a_dtype, d.m * d.k, *a_scale, av);
    decode_operand(b, d.b_dtype, d.n * d.k, *b_scale, bv);
  }
  MatmulDesc f32;
  f32.m = d.m, f32.n = d.n, f32.k = d.k, f32.trans_b = true;
  f32.dtype = DType::f32, f32.c_dtype = DType::f32;
  // The bias joins the f32 sums in the GEMM's own epilogue (after the accumulation, as the
  // spec adds it), widened to f32 first: exact, n values.
  const void* bias_f32 = nullptr;
  if (d.has_bias) {
    f32.has_bias = true;
    f32.bias_dtype = DType::f32;
    bias_f32 = bias;
    if (d.bias_dtype != DType::f32) {
      float* widened = bias32.get(static_cast<std::size_t>(d.n));
      convert(bias, d.bias_dtype, widened, DType::f32, static_cast<std::size_t>(d.n));
      bias_f32 = widened;
    }
  }
  if (d.c_dtype == DType::f32) {
    matmul(f32, av, bv, bias_f32, c);
    return;
  }
  const auto mn = static_cast<std::size_t>(d.m * d.n);
  float* product = c32.get(mn);
  matmul(f32, av, bv, bias_f32, product);
  convert(product, DType::f32, c, d.c_dtype, mn);
}

}  // namespace mixprec::kernels::cpu
