// kernels::matmul: validates, handles empty shapes, and turns every dtype combination into a
// GEMM oneDNN runs directly. f16 emulates Tensor Cores: f16 -> f32 is exact and so is the
// product of two f16 (22 significant bits), oneDNN accumulates in f32, and the result is rounded
// to f16 once, so it overflows to Inf exactly where a GPU's f16-output GEMM would.
// The gelu_tanh post-op (matmul, matmul_aux) and its backward form (matmul_post_op_backward):
// oneDNN writes the GEMM's result rounded to c_dtype (the pre-activation, into aux when it is
// kept; D, into C, for the backward), then one vector pass over it: the elementwise gelu_tanh
// kernel (H -> C), or the gradient pass of matmul_gelu_simd.cpp (C = gelu_tanh'(aux) D in place,
// the bias gradient's column sums in the same sweep, tiled as reduce tiles its column sums). So
// the bits are those of the unfused kernels on this backend; the pass costs one read of the
// result less than them backward (no separate sum over dh) and no allocation. oneDNN's own
// gelu_tanh post-op is not used: its formula (0.5 x (1 + tanh)) is not the spec's, and it
// would see the unrounded f32 sum.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kernels/convert.h"
#include "kernels/cpu/column_tiles.h"
#include "kernels/cpu/growing_buffer.h"
#include "kernels/cpu/matmul_gelu_simd.h"
#include "kernels/cpu/matmul_onednn.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/error.h"
#include "mixprec/core/verbose.h"
#include "core/parallel_chunks.h"

namespace mixprec::kernels {
namespace {

// MIXPREC_MATMUL=ref forces the reference kernel; read once (a typo throws on every call).
bool force_reference() {
  static const bool ref = [] {
    const char* v = std::getenv("MIXPREC_MATMUL");
    const std::string_view s = v == nullptr ? std::string_view() : std::string_view(v);
    MIXPREC_CHECK(s.empty() || s == "ref" || s == "onednn", ValueError, "matmul",
                  "MIXPREC_MATMUL must be 'ref' or 'onednn', got '" << s << "'");
    return s == "ref";
  }();
  return ref;
}

using Buffer = cpu::GrowingBuffer;

struct Workspace {
  Buffer a, b, bias, c;
};

// 16-bit src (bf16 or f16) -> f32, exact.
void widen(const void* src, DType t, float* dst, std::size_t n) {
  cpu::convert(src, t, dst, DType::f32, n);
}

// f32 -> 16-bit dst (bf16 or f16), round to nearest even.
void narrow(const float* src, void* dst, DType t, std::size_t n) {
  cpu::convert(src, DType::f32, dst, t, n);
}

std::atomic<MatmulBf16Route>& bf16_route() {
  static std::atomic<MatmulBf16Route> route{MatmulBf16Route::automatic};
  return route;
}

// Whether bf16 inputs go to oneDNN as bf16 (see MatmulBf16Route).
bool bf16_native() {
  switch (bf16_route().load(std::memory_order_relaxed)) {
    case MatmulBf16Route::native: return true;
    case MatmulBf16Route::widen: return false;
    case MatmulBf16Route::automatic: break;
  }
  return isa_allowed(Isa::avx512_bf16);
}

// Why bf16 inputs were widened instead of going to oneDNN as bf16.
std::string bf16_skip_reason(bool tried_native, const cpu::OnednnInfo& info) {
  if (tried_native) return info.impl + " is reference-only or missing";
  if (bf16_route().load(std::memory_order_relaxed) == MatmulBf16Route::widen) {
    return "route forced to widen by set_matmul_bf16_route()";
  }
  if (!cpu_features().avx512_bf16) {
    return "CPU lacks avx512_bf16 (oneDNN would emulate it, ~3x slower than f32)";
  }
  return std::string("capped at ") + name(max_isa()) + " by MIXPREC_ISA or set_max_isa()";
}

// A GEMM in the form oneDNN takes, and where its C really lives.
struct Plan {
  MatmulDesc d;
  const void* a;
  const void* b;
  const void* bias;
  void* c;
  bool c_in_workspace = false;
  std::int64_t ldb = 0;  // B's row stride in elements when padded; 0 = dense
};

// oneDNN 2.6's f32 GEMM reads a row-major (non-transposed) B whose rows are a multiple of 4 KiB
// apart about twice as slowly as one with any other stride (measured on Zen 2, AVX2: the seed
// MLP's dX = dY W with W [4096, 4096] ran at 90 GFLOP/s, and at 188 with the rows 64 bytes
// further apart; cache-set conflicts between the rows it streams). Such a B is copied with 64
// bytes of padding per row when the copy (2 bytes moved per element and byte of B) is small
// beside the GEMM: m >= 64 rows of A share every element of B.
constexpr std::int64_t kConflictStrideBytes = 4096;
constexpr std::int64_t kRowPadBytes = 64;
constexpr std::int64_t kMinRowsForPadding = 64, kMinBElementsForPadding = 1 << 18;

bool pad_b_rows(const MatmulDesc& d, std::size_t element_bytes) {
  const auto row_bytes = d.n * static_cast<std::int64_t>(element_bytes);
  return !d.trans_b && row_bytes % kConflictStrideBytes == 0 && d.m >= kMinRowsForPadding &&
         d.k * d.n >= kMinBElementsForPadding;
}

// Rewrites the operands for oneDNN: f16 inputs (and bf16 ones when widen_inputs) become f32
// copies, a conflict-prone B gets padded rows (pad_b_rows), a bias oneDNN cannot take becomes
// f32, and a C it cannot write becomes an f32 workspace (pre-loaded when accumulating) that is
// rounded into C once, after the GEMM.
Plan prepare(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c,
             bool widen_inputs, Workspace& ws) {
  Plan p{desc, a, b, bias, c};
  const auto m = static_cast<std::size_t>(desc.m);
  const auto n = static_cast<std::size_t>(desc.n);
  const auto k = static_cast<std::size_t>(desc.k);
  const bool widen_ab = desc.dtype == DType::f16 || (widen_inputs && desc.dtype == DType::bf16);
  if (widen_ab) {
    float* a32 = ws.a.get(m * k);
    widen(a, desc.dtype, a32, m * k);
    p.a = a32;
    p.d.dtype = DType::f32;
  }
  const std::size_t b_bytes = size_of(p.d.dtype);
  if (pad_b_rows(p.d, b_bytes)) {
    // Row r of B goes to r * ldb, widened on the way when needed: one pass either way.
    p.ldb = desc.n + kRowPadBytes / static_cast<std::int64_t>(b_bytes);
    const auto ldb = static_cast<std::size_t>(p.ldb);
    std::byte* padded = reinterpret_cast<std::byte*>(ws.b.get((k * ldb * b_bytes + 3) / 4));
    const std::size_t src_row = n * size_of(desc.dtype);
    parallel_for(desc.k, true, [&](std::int64_t r) {
      const auto row = static_cast<std::size_t>(r);
      const std::byte* from = static_cast<const std::byte*>(b) + row * src_row;
      std::byte* to = padded + row * ldb * b_bytes;
      if (widen_ab) {
        widen(from, desc.dtype, reinterpret_cast<float*>(to), n);
      } else {
        std::memcpy(to, from, src_row);
      }
    });
    p.b = padded;
  } else if (widen_ab) {
    float* b32 = ws.b.get(k * n);
    widen(b, desc.dtype, b32, k * n);
    p.b = b32;
  }
  if (desc.has_bias && desc.bias_dtype != DType::f32 && desc.bias_dtype != p.d.dtype) {
    float* bias32 = ws.bias.get(n);
    widen(bias, desc.bias_dtype, bias32, n);
    p.bias = bias32;
    p.d.bias_dtype = DType::f32;
  }
  if (desc.c_dtype != DType::f32 && desc.c_dtype != p.d.dtype) {
    float* c32 = ws.c.get(m * n);
    if (desc.accumulate) widen(c, desc.c_dtype, c32, m * n);
    p.c = c32;
    p.d.c_dtype = DType::f32;
    p.c_in_workspace = true;
  }
  return p;
}

void log_call(const MatmulDesc& d, std::string_view impl, std::string_view skipped = {}) {
  verbose_log("matmul", name(d.dtype), impl, skipped);
}

void run_onednn(const MatmulDesc& requested, const void* a, const void* b, const void* bias, void* c) {
  thread_local Workspace ws;
  const bool verbose = verbose_enabled();
  cpu::OnednnInfo info;
  cpu::OnednnInfo* want = verbose ? &info : nullptr;
  std::string skipped;
  MatmulDesc desc = requested;
  desc.bf16_fpmath = requested.bf16_fpmath && requested.dtype == DType::f32;
  if (desc.bf16_fpmath && !bf16_native()) {
    // Without native bf16 dot products, bf16 products would be emulated: slower, not faster.
    desc.bf16_fpmath = false;
    if (verbose) skipped = "medium precision (bf16 products): CPU lacks avx512_bf16, ran full f32";
  }

  const bool try_native_bf16 = desc.dtype == DType::bf16 && bf16_native();
  bool ran = false;
  Plan p{};
  if (desc.dtype != DType::bf16 || try_native_bf16) {
    p = prepare(desc, a, b, bias, c, /*widen_inputs=*/false, ws);
    ran = cpu::onednn_matmul(p.d, p.a, p.b, p.bias, p.c, want, p.ldb);
  }
  if (!ran && desc.dtype == DType::bf16) {
    // bf16 -> f32 is exact and bf16 products are exact in f32, so the f32 GEMM computes the
    // same thing; only the f32 summation order may differ.
    if (verbose) skipped = "onednn bf16 primitive: " + bf16_skip_reason(try_native_bf16, info);
    p = prepare(desc, a, b, bias, c, /*widen_inputs=*/true, ws);
    ran = cpu::onednn_matmul(p.d, p.a, p.b, p.bias, p.c, want, p.ldb);
  }
  MIXPREC_CHECK(ran, BackendError, "matmul",
                "oneDNN has no implementation for a " << name(desc.dtype) << " " << desc.m << "x"
                    << desc.n << "x" << desc.k
                    << " GEMM; set MIXPREC_MATMUL=ref to use the reference kernel");
  if (p.c_in_workspace) {
    narrow(static_cast<const float*>(p.c), c, desc.c_dtype,
           static_cast<std::size_t>(desc.m) * static_cast<std::size_t>(desc.n));
  }
  if (verbose) {
    std::string impl;
    if (p.d.dtype != desc.dtype) impl += std::string(name(desc.dtype)) + "->f32 + ";
    impl += info.impl;
    if (info.cached) impl += " (cached)";
    if (p.ldb != 0) impl += " (B rows padded)";
    if (p.c_in_workspace) impl += std::string(" + round to ") + name(desc.c_dtype);
    if (desc.dtype == DType::f16) {
      skipped = "native f16 GEMM: none on CPU (emulating Tensor Cores: f32 accumulation)";
    }
    log_call(desc, impl, skipped);
  }
}

// The GEMM of desc (gelu_tanh left for the caller's pass; relu is oneDNN's post-op), written
// rounded to c_dtype into out.
void product(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* out) {
  MatmulDesc plain = desc;
  if (plain.post_op == MatmulPostOp::gelu_tanh) plain.post_op = MatmulPostOp::none;
  if (plain.k == 0) {
    ref::matmul(plain, a, b, bias, out);  // C = [C +] bias or 0: an O(m*n) fill
    if (verbose_enabled()) log_call(plain, "ref (k == 0: bias/zero fill)");
    return;
  }
  run_onednn(plain, a, b, bias, out);
}

// The gelu_tanh post-op: H = the GEMM's result (into aux when kept, else into C), then
// C = gelu_tanh(H) by the elementwise kernel, one pass (in place without aux).
void gelu_forward(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c,
                  void* aux) {
  void* h = aux != nullptr ? aux : c;
  product(desc, a, b, bias, h);
  const std::int64_t count = desc.m * desc.n, unit = 1;
  cpu::unary(UnaryOp::gelu_tanh, std::span<const std::int64_t>(&count, 1),
             {h, desc.c_dtype, std::span<const std::int64_t>(&unit, 1)}, c, desc.c_dtype);
}

// Rows per task of the gradient pass without a bias gradient: about 16K elements.
std::int64_t rows_per_task(std::int64_t n) {
  return std::max<std::int64_t>(1, std::int64_t{16384} / std::max<std::int64_t>(n, 1));
}

}  // namespace

MatmulBf16Route set_matmul_bf16_route(MatmulBf16Route route) {
  return bf16_route().exchange(route);
}

namespace cpu {
void matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c) {
  validate_matmul(desc, a, b, bias, c);
  if (desc.m == 0 || desc.n == 0) {
    if (verbose_enabled()) log_call(desc, "nothing (empty result)");
    return;
  }
  if (force_reference()) {
    ref::matmul(desc, a, b, bias, c);
    if (verbose_enabled()) log_call(desc, "ref", "onednn: MIXPREC_MATMUL=ref");
    return;
  }
  if (desc.post_op == MatmulPostOp::gelu_tanh) return gelu_forward(desc, a, b, bias, c, nullptr);
  product(desc, a, b, bias, c);
}

void matmul_aux(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c,
                void* aux) {
  validate_matmul_aux(desc, a, b, bias, c, aux);
  if (desc.m == 0 || desc.n == 0) return;
  if (force_reference()) {
    ref::matmul_aux(desc, a, b, bias, c, aux);
    if (verbose_enabled()) verbose_log("matmul_aux", name(desc.dtype), "ref", "MIXPREC_MATMUL=ref");
    return;
  }
  gelu_forward(desc, a, b, bias, c, aux);
  if (verbose_enabled()) {
    verbose_log("matmul_aux", name(desc.dtype),
                "matmul into aux + gelu_tanh pass (the unary kernel, aux -> C)");
  }
}

void matmul_post_op_backward(const MatmulDesc& desc, const void* a, const void* b, const void* aux,
                             void* c, void* bias_grad) {
  validate_matmul_post_op_backward(desc, a, b, aux, c, bias_grad);
  if (desc.m == 0 || desc.n == 0 || force_reference()) {
    // Empty (a bias gradient over no rows is zeros) or forced: the reference's loops.
    ref::matmul_post_op_backward(desc, a, b, aux, c, bias_grad);
    if (verbose_enabled()) {
      verbose_log("matmul_post_op_backward", name(desc.dtype), "ref",
                  force_reference() ? "MIXPREC_MATMUL=ref" : "empty result");
    }
    return;
  }
  MatmulDesc gemm = desc;
  gemm.has_bias = false;  // has_bias names the bias gradient here, not a bias to add
  product(gemm, a, b, nullptr, c);
  const std::int64_t m = desc.m, n = desc.n;
  const bool parallel = m * n >= kParallelMinWork;
  if (desc.has_bias && n > 1) {
    // Whole rows per task once there are row chunks enough for the threads: the pass streams
    // its rows as the elementwise kernels do (256-column tasks read each row in pieces).
    const std::int64_t task_cols = column_row_chunks(m, n).kchunks >= 4 ? n : kColumnBlock;
    for_column_tiles(
        1, m, n, parallel,
        [&](std::int64_t, std::int64_t k0, std::int64_t k1, std::int64_t j0, std::int64_t j1,
            float* sums) { gelu_tanh_backward_tile(desc.c_dtype, c, aux, n, k0, k1, j0, j1, sums); },
        [](float x, float y) { return x + y; },
        [&](std::int64_t, std::int64_t j, float total) {
          dispatch(desc.bias_dtype, [&](auto t) {
            static_cast<decltype(t)*>(bias_grad)[j] = decltype(t)(total);
          });
        },
        task_cols);
  } else {
    const std::int64_t rows = rows_per_task(n);
    parallel_for((m + rows - 1) / rows, parallel, [&](std::int64_t t) {
      gelu_tanh_backward_tile(desc.c_dtype, c, aux, n, t * rows, std::min(m, (t + 1) * rows), 0, n,
                              nullptr);
    });
    // One column: reduce sums it as a row, in its own order (no column tiles to share).
    if (desc.has_bias) cpu::reduce(ReduceOp::sum, c, desc.c_dtype, 1, m, n, bias_grad, desc.bias_dtype);
  }
  if (verbose_enabled()) {
    verbose_log("matmul_post_op_backward", name(desc.dtype),
                std::string("matmul + gelu_tanh gradient pass") +
                    (desc.has_bias ? " with the bias gradient's column sums" : "") + " (" +
                    simd_target() + ")");
  }
}
}  // namespace cpu

}  // namespace mixprec::kernels
