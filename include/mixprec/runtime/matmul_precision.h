#pragma once
/// Precision of f32 matrix multiplications: the CPU analogue of TF32 mode on GPUs.
/// highest: true f32 products. medium: f32 inputs are rounded to bf16 inside the GEMM and the
/// products accumulated in f32 (oneDNN's fpmath_mode::bf16) — about 2x faster where the CPU has
/// native bf16 dot products (AVX512_BF16/AMX), with ~3 significant digits per product. On CPUs
/// without them, medium runs as highest (MIXPREC_VERBOSE=1 says so).
#include <cstdint>
#include <string_view>

namespace mixprec::amp {

enum class MatmulPrecision : std::uint8_t { highest, medium };

/// "highest" or "medium".
const char* name(MatmulPrecision precision);
/// Parses "highest"/"medium"; ValueError otherwise.
MatmulPrecision parse_matmul_precision(std::string_view text);

/// Sets the process-wide default (initially highest, or MIXPREC_MATMUL_PRECISION from the env).
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

}  // namespace mixprec::amp
