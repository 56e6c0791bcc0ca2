#pragma once
/// Precision of f32 matrix multiplications, PyTorch's torch.set_float32_matmul_precision.
/// highest: true f32 products, everywhere.
/// high: on a GPU, f32 inputs rounded to TF32 (10-bit mantissa) on the Tensor Cores with f32
/// accumulation (PyTorch's allow_tf32); a CPU has no TF32, so there it runs as highest.
/// medium: on a CPU, f32 inputs rounded to bf16 inside the GEMM and the products accumulated in
/// f32 (oneDNN's fpmath_mode::bf16), about 2x faster where the CPU has native bf16 dot products
/// (AVX512_BF16/AMX), with ~3 significant digits per product; on CPUs without them it runs as
/// highest (MIXPREC_VERBOSE=1 says so). On a GPU medium runs as high (TF32).
#include <cstdint>
#include <string_view>

namespace mixprec::runtime {

enum class MatmulPrecision : std::uint8_t { highest, high, medium };

/// "highest", "high" or "medium".
const char* name(MatmulPrecision precision);
/// Parses "highest"/"high"/"medium"; ValueError otherwise.
MatmulPrecision parse_matmul_precision(std::string_view text);

/// Sets the process-wide default (initially highest, or MIXPREC_MATMUL_PRECISION from the env:
/// a value parse_matmul_precision does not take is an error at the first GEMM, not ignored).
void set_matmul_precision(MatmulPrecision precision);
/// The precision f32 matmuls on this thread use now (a guard's, else the process default).
MatmulPrecision matmul_precision();

/// Overrides the precision for this thread until destroyed (nests).
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(MatmulPrecision precision);
  ~MatmulPrecisionGuard();
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  int previous_;
};

}  // namespace mixprec::runtime
