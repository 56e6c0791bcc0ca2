#pragma once
/// Run-time CPU feature detection, and the ISA level that kernels may use.
#include <string>

namespace mixprec {

/// What this CPU (and the OS, for AVX-512 state) supports, read once through cpuid/xgetbv.
struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;  ///< vcvtne2ps2bf16 and vdpbf16ps: native bf16 dot products
  bool avx512_fp16 = false;  ///< native fp16 arithmetic (Sapphire Rapids and later)
  bool amx_bf16 = false;     ///< AMX tiles with bf16
  /// Space-separated list of the flags above that are set, e.g. "avx2 fma f16c avx512f".
  std::string to_string() const;
};

/// Features of the CPU we run on (detected once, thread-safe).
const CpuFeatures& cpu_features();

/// Kernel ISA levels, slowest first; a kernel may use a level if the CPU has it and it is allowed.
enum class Isa { scalar, avx2, avx512, avx512_bf16 };

/// Highest ISA level kernels may use: what the CPU has, capped by MIXPREC_ISA
/// (scalar|avx2|avx512|avx512_bf16) in the environment or by set_max_isa().
Isa max_isa();
/// Caps the ISA level for this process (tests use it to compare vector paths with scalar ones).
void set_max_isa(Isa cap);
/// Name of an ISA level: "scalar", "avx2", "avx512", "avx512_bf16".
const char* name(Isa isa);

}  // namespace mixprec
