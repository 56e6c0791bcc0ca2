// The gelu_tanh post-op on the GPU (kernels/matmul.h): matmul's and matmul_aux's forward, and
// matmul_post_op_backward. The first path that takes a call runs it, and MIXPREC_VERBOSE=1 logs
// which, and why a faster one passed:
//   forward   1. one cuBLASLt call with a GELU epilogue (GELU_AUX_BIAS, GELU_AUX, GELU_BIAS,
//                GELU), when k > 0, the bias (if any) has C's dtype (cuBLASLt's bias has D's
//                type) and, with aux, n is a multiple of 8 (cuBLASLt's aux leading dimension);
//             2. matmul without the post-op (into aux, or C), then the gelu_tanh kernel
//                (aux -> C, or C in place): the unfused kernels, the spec's bits but for the
//                GEMM's summation order;
//   backward  1. DGELU_BGRAD: the derivative and the bias gradient in the GEMM (n % 8 == 0);
//             2. DGELU, then our column sums (reduce over the rows) for the bias gradient;
//             3. matmul into C, unary_backward(gelu_tanh) in place, then the column sums.
// A problem cuBLASLt refuses (no algorithm, or the call's status) is remembered in its plan
// cache and goes to the next path from then on. cuBLASLt applies GELU and its derivative to the
// unrounded f32 sums with a tanh of its own; the tolerance that admits it is in docs/cuda.md
// ("GELU epilogues"), and the conformance cases run both paths (n = 8k and n odd).
#include <cstdint>
#include <span>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul_cublaslt.h"
#include "kernels/matmul.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels::cuda {
namespace {

/// Why cuBLASLt's GELU epilogues cannot take the problem (empty: they may).
std::string epilogue_refusal(const MatmulDesc& d, bool aux, bool bias_in_d_type) {
  if (d.k == 0) return "k == 0 (a bias fill)";
  if (!bias_in_d_type) {
    return std::string("a ") + name(d.bias_dtype) + " bias with " + name(d.c_dtype) +
           " C (cuBLASLt's bias has D's type)";
  }
  if (aux && d.n % 8 != 0) {
    return "n = " + std::to_string(d.n) + " is not a multiple of 8 (the aux leading dimension)";
  }
  return {};
}

void log_gelu(const char* op, const MatmulDesc& d, const std::string& impl,
              const std::string& skipped) {
  verbose_log(op, name(d.dtype), impl, skipped);
}

}  // namespace

void gelu_matmul(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c,
                 void* aux) {
  const char* op = aux != nullptr ? "matmul_aux" : "matmul";
  std::string why = epilogue_refusal(desc, aux != nullptr,
                                     !desc.has_bias || desc.bias_dtype == desc.c_dtype);
  if (why.empty()) {
    const CublasLtRun run = gelu_gemm_cublaslt(desc, a, b, desc.has_bias ? bias : nullptr, c, aux,
                                               aux != nullptr ? LtGelu::forward_aux : LtGelu::forward);
    if (run.ran) {
      if (verbose_enabled()) {
        log_gelu(op, desc,
                 std::string("cublasLt ") +
                     (aux != nullptr ? (desc.has_bias ? "GELU_AUX_BIAS" : "GELU_AUX")
                                     : (desc.has_bias ? "GELU_BIAS" : "GELU")) +
                     " epilogue" + (run.cached ? " (cached)" : ""),
                 "");
      }
      return;
    }
    why = "cuBLASLt has no algorithm for it or refused the call";
  }
  // The unfused kernels: the pre-activation rounded to C's dtype, then GELU of it.
  MatmulDesc plain = desc;
  plain.post_op = MatmulPostOp::none;
  void* h = aux != nullptr ? aux : c;
  matmul(plain, a, b, bias, h);
  const std::int64_t count = desc.m * desc.n, unit = 1;
  unary(UnaryOp::gelu_tanh, std::span<const std::int64_t>(&count, 1),
        {h, desc.c_dtype, std::span<const std::int64_t>(&unit, 1)}, c, desc.c_dtype);
  if (verbose_enabled()) {
    log_gelu(op, desc, "matmul + cuda gelu_tanh kernel", "cublasLt GELU epilogue: " + why);
  }
}

void matmul_aux(const MatmulDesc& desc, const void* a, const void* b, const void* bias, void* c,
                void* aux) {
  validate_matmul_aux(desc, a, b, bias, c, aux);
  if (desc.m == 0 || desc.n == 0) return;
  gelu_matmul(desc, a, b, bias, c, aux);
}

void matmul_post_op_backward(const MatmulDesc& desc, const void* a, const void* b, const void* aux,
                             void* c, void* bias_grad) {
  validate_matmul_post_op_backward(desc, a, b, aux, c, bias_grad);
  if (desc.n == 0) return;
  const char* op = "matmul_post_op_backward";
  const std::int64_t m = desc.m, n = desc.n;
  if (m == 0) {  // the gradient of a bias over no rows
    if (desc.has_bias) fill(bias_grad, desc.bias_dtype, n, 0.0f);
    return;
  }
  const bool verbose = verbose_enabled();
  std::string why = epilogue_refusal(desc, true, true);
  std::string skipped;
  if (why.empty() && desc.has_bias) {
    const CublasLtRun run =
        gelu_gemm_cublaslt(desc, a, b, bias_grad, c, aux, LtGelu::backward_bgrad);
    if (run.ran) {
      if (verbose) {
        log_gelu(op, desc,
                 std::string("cublasLt DGELU_BGRAD epilogue (") + name(desc.bias_dtype) +
                     " bias gradient)" + (run.cached ? " (cached)" : ""),
                 "");
      }
      return;
    }
    skipped = std::string("cublasLt DGELU_BGRAD: no algorithm for a ") + name(desc.bias_dtype) +
              " bias gradient of " + name(desc.c_dtype) + " C, or the call was refused; ";
  }
  if (why.empty()) {
    const CublasLtRun run = gelu_gemm_cublaslt(desc, a, b, nullptr, c, aux, LtGelu::backward);
    if (run.ran) {
      if (desc.has_bias) reduce(ReduceOp::sum, c, desc.c_dtype, 1, m, n, bias_grad, desc.bias_dtype);
      if (verbose) {
        log_gelu(op, desc,
                 std::string("cublasLt DGELU epilogue") + (run.cached ? " (cached)" : "") +
                     (desc.has_bias ? " + cuda column sums" : ""),
                 skipped);
      }
      return;
    }
    why = "cuBLASLt has no algorithm for it or refused the call";
  }
  // The unfused kernels: D rounded to C's dtype, its gradient through GELU in place, the sums.
  MatmulDesc plain = desc;
  plain.post_op = MatmulPostOp::none;
  plain.has_bias = false;  // has_bias names the bias gradient here
  matmul(plain, a, b, nullptr, c);
  unary_backward(UnaryOp::gelu_tanh, aux, desc.c_dtype, nullptr, desc.c_dtype, c, desc.c_dtype, c,
                 desc.c_dtype, m * n);
  if (desc.has_bias) reduce(ReduceOp::sum, c, desc.c_dtype, 1, m, n, bias_grad, desc.bias_dtype);
  if (verbose) {
    log_gelu(op, desc,
             std::string("matmul + cuda gelu_tanh gradient kernel") +
                 (desc.has_bias ? " + cuda column sums" : ""),
             skipped + "cublasLt GELU epilogues: " + why);
  }
}

}  // namespace mixprec::kernels::cuda
