// kernels::fp8_gemm on the GPU. On fp8 Tensor Cores (sm_89 and newer) it is one cuBLASLt call
// (matmul_cublaslt.cu: the operands' scale pointers, FAST_ACCUM on request, the plan cached
// with the other GEMMs'), after a one-thread kernel turns the quantisation scales into the
// factors cuBLASLt multiplies by (their reciprocals, exact for powers of two). Where cuBLASLt
// cannot run it (an older GPU, a shape or alignment its fp8 kernels refuse), a plain kernel of
// ours computes the spec: each thread one element of C, the reference's sum in p order, so
// those results are the reference's bits. The verbose log says which ran and why. A bias goes
// into the f32 sums before C's one rounding: on the cuBLASLt path through an f32 product and a
// finishing kernel (cuBLASLt's fp8 bias epilogue takes a bias of D's 16-bit type only, and the
// fp8 Linear's bias is f32), in our kernel as it sums.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_cublaslt.h"
#include "kernels/fp8_gemm.h"
#include "kernels/spec/fp8_scale_math.h"
#include "mixprec/core/device.h"
#include "mixprec/core/gpu.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels::cuda {
namespace {

/// factors[0] = 1 / *a_scale, factors[1] = 1 / *b_scale, in f32 (read on the device: no host
/// read of a scale).
__global__ void reciprocal_scales_kernel(const float* a_scale, const float* b_scale,
                                         float* factors) {
  factors[0] = 1.0f / *a_scale;
  factors[1] = 1.0f / *b_scale;
}

/// c[i][j] = round_c(sum_p operand(A[i][p]) * operand(B[j][p]) [+ bias[j]]), one thread per
/// element; the reference's order of summation, so its bits. bias null: none.
__global__ void fp8_gemm_kernel(std::int64_t m, std::int64_t n, std::int64_t k,
                                const std::uint8_t* a, bool a_e4m3, const std::uint8_t* b,
                                bool b_e4m3, const float* factors, const void* bias,
                                DType bias_dtype, void* c, DType c_dtype) {
  MIXPREC_GRID_STRIDE(idx, m * n) {
    const std::int64_t i = idx / n, j = idx % n;
    const float ia = factors[0], ib = factors[1];
    float acc = 0.0f;
    for (std::int64_t p = 0; p < k; ++p) {
      acc += fp8_math::operand_value(a[i * k + p], a_e4m3, ia) *
             fp8_math::operand_value(b[j * k + p], b_e4m3, ib);
    }
    if (bias != nullptr) acc += load(bias, bias_dtype, j);
    store(c, c_dtype, idx, acc);
  }
}

/// c[i] = round_c(product[i] + bias[i % n]): the bias joining cuBLASLt's f32 sums.
__global__ void add_bias_kernel(std::int64_t total, std::int64_t n, const float* product,
                                const void* bias, DType bias_dtype, void* c, DType c_dtype) {
  MIXPREC_GRID_STRIDE(i, total) { store(c, c_dtype, i, product[i] + load(bias, bias_dtype, i % n)); }
}

/// Whether the current GPU has fp8 Tensor Cores (compute capability 8.9 or newer).
bool has_fp8_tensor_cores() {
  const GpuInventory& inv = gpu_inventory();
  const int index = current_device().index;
  return index >= 0 && static_cast<std::size_t>(index) < inv.gpus.size() &&
         inv.gpus[static_cast<std::size_t>(index)].tensor_fp8;
}

/// cuBLASLt's fp8 kernels read 16-byte aligned operands whose rows (k bytes) keep that
/// alignment; anything else goes to our kernel without asking.
bool cublaslt_can_take(const Fp8GemmDesc& d, const void* a, const void* b, const void* c) {
  const auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return d.k % 16 == 0 && d.n % 8 == 0 && aligned16(a) && aligned16(b) && aligned16(c);
}

}  // namespace

void fp8_gemm(const Fp8GemmDesc& d, const void* a, const float* a_scale, const void* b,
              const float* b_scale, const void* bias, void* c) {
  validate_fp8_gemm(d, a, a_scale, b, b_scale, bias, c);
  if (d.m == 0 || d.n == 0) return;
  const bool verbose = verbose_enabled();
  const std::string label = std::string(name(d.a_dtype)) + "," + name(d.b_dtype) + "->" +
                            name(d.c_dtype);
  const Scratch factors(2 * sizeof(float), "fp8_gemm");
  if (d.k > 0) {
    reciprocal_scales_kernel<<<1, 1, 0, stream()>>>(a_scale, b_scale, factors.as<float>());
    check_launch("fp8_gemm (scales)");
  }
  std::string why;
  if (d.k == 0) {
    why = "k == 0: zeros";
  } else if (!has_fp8_tensor_cores()) {
    why = "this GPU has no fp8 Tensor Cores (sm_89 and newer)";
  } else if (!cublaslt_can_take(d, a, b, c)) {
    why = "k not a multiple of 16, n not a multiple of 8, or an operand not 16-byte aligned";
  } else {
    // With a bias: cuBLASLt's f32 sums into scratch, then one rounding with the bias added.
    const std::int64_t total = d.m * d.n;
    const Scratch product(d.has_bias ? static_cast<std::size_t>(total) * sizeof(float) : 0,
                          "fp8_gemm");
    Fp8GemmDesc run_desc = d;
    if (d.has_bias) run_desc.c_dtype = DType::f32;
    const Fp8CublasLtRun run =
        fp8_gemm_cublaslt(run_desc, a, factors.as<float>(), b, factors.as<float>() + 1,
                          d.has_bias ? product.as<float>() : c);
    if (run.ran) {
      if (d.has_bias) {
        add_bias_kernel<<<grid(total), kThreads, 0, stream()>>>(
            total, d.n, product.as<float>(), bias, d.bias_dtype, c, d.c_dtype);
        check_launch("fp8_gemm (bias)");
      }
      if (verbose) {
        verbose_log("fp8_gemm", label, std::string("cublasLt fp8") +
                                           (d.fast_accum ? " fast-accum" : "") +
                                           (run.cached ? " (cached)" : "") +
                                           (d.has_bias ? " + f32 bias kernel" : ""));
      }
      return;
    }
    why = "cuBLASLt has no fp8 algorithm for this problem";
  }
  const std::int64_t total = d.m * d.n;
  fp8_gemm_kernel<<<grid(total), kThreads, 0, stream()>>>(
      d.m, d.n, d.k, static_cast<const std::uint8_t*>(a), d.a_dtype == DType::f8e4m3,
      static_cast<const std::uint8_t*>(b), d.b_dtype == DType::f8e4m3, factors.as<float>(),
      d.has_bias ? bias : nullptr, d.bias_dtype, c, d.c_dtype);
  check_launch("fp8_gemm");
  if (verbose) verbose_log("fp8_gemm", label, "cuda reference-order kernel", why);
}

}  // namespace mixprec::kernels::cuda
