#pragma once
/// Run-time CPU feature detection (x86-64 and arm64), the SIMD level kernels may use, and the
/// cap on it (MIXPREC_ISA or set_max_isa()).
///
/// Kernels are written once over Google Highway and compiled for several targets (EMU128, SSE4,
/// AVX2, AVX-512 on x86; NEON, SVE, SVE2 on arm64); Highway picks the best target at run time.
/// An Isa level caps that choice: Isa::avx2 on an AVX-512 machine runs the AVX2 code, exactly
/// what an AVX2-only CPU runs. Isa::scalar runs Highway's portable EMU128 target (plain C++ over
/// 16-byte "vectors"), not the reference: the reference is a backend (MIXPREC_BACKEND=ref).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mixprec {

/// What this CPU (and the OS, for AVX/AVX-512/SVE state) supports, read once.
struct CpuFeatures {
  // x86-64
  bool sse4 = false;         ///< SSSE3, SSE4.1, SSE4.2 (and POPCNT)
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
  // arm64
  bool neon = false;         ///< Advanced SIMD (always on arm64)
  bool sve = false;
  bool sve2 = false;
  bool arm_bf16 = false;     ///< BFDOT/BFMMLA (Armv8.6 BF16)
  bool arm_fp16 = false;     ///< half-precision arithmetic (FEAT_FP16)
  /// Space-separated list of the flags above that are set, e.g. "avx2 fma f16c avx512f".
  std::string to_string() const;
};

/// Features the decision logic sees (detected once, thread-safe): the real CPU's, or, when
/// MIXPREC_CPU_PROFILE names a class of the table (cpu_class.h), that class's. Everything that
/// decides (levels, auto precision, routes, log lines) reads this; what executes is capped to
/// hardware_cpu_features() whatever it says, so a profile never runs an illegal instruction.
const CpuFeatures& cpu_features();
/// Features of the real CPU, whatever MIXPREC_CPU_PROFILE says.
const CpuFeatures& hardware_cpu_features();
/// The MIXPREC_CPU_PROFILE class in force, or empty (unset, or unknown).
const std::string& cpu_profile();
/// For an unknown MIXPREC_CPU_PROFILE: the warning (printed once to stderr) naming the known
/// classes; empty otherwise.
std::string cpu_profile_warning();

/// SIMD levels. Within one architecture a higher value is a superset of a lower one
/// (scalar < sse4 < avx2 < avx512 < avx512_bf16 on x86; scalar < neon < sve < sve2 on arm64);
/// levels of different architectures are not comparable: use isa_allowed(), not operator<.
enum class Isa { scalar, sse4, avx2, avx512, avx512_bf16, neon, sve, sve2 };

/// The best level these features allow (the last of isa_levels_of()).
Isa best_isa_of(const CpuFeatures& features);
/// The capping levels these features allow, lowest first (always starts with scalar).
std::vector<Isa> isa_levels_of(const CpuFeatures& features);

/// Highest level kernels may use: the best this CPU has, capped by MIXPREC_ISA in the
/// environment or by set_max_isa().
Isa max_isa();
/// Whether kernels of `level` may run now: this CPU has it, and the cap is not below it.
bool isa_allowed(Isa level);
/// Caps the level for this process (tests use it to run every target this CPU has). A level
/// the CPU lacks, or one of another architecture, caps nothing above what the CPU has.
void set_max_isa(Isa cap);
/// The levels this CPU supports, lowest first (always starts with scalar); tests iterate it.
/// Under MIXPREC_CPU_PROFILE, the profile's levels.
std::vector<Isa> supported_isas();
/// The level that really executes under the current cap: max_isa() where the real CPU has it,
/// else the best the real CPU has below it (a profile's level the hardware lacks), or the real
/// CPU's best for a level of another architecture (an arm64 profile on x86-64).
Isa executed_isa();
/// The best level the real CPU has.
Isa hardware_isa();
/// Name of a level: "scalar", "sse4", "avx2", "avx512", "avx512_bf16", "neon", "sve", "sve2".
const char* name(Isa isa);
/// The level named s, or nothing if s names none.
std::optional<Isa> parse_isa(std::string_view s);
/// Name of the Highway target the vector kernels run right now ("AVX2", "AVX3", "SSE4",
/// "EMU128", "NEON", "SVE", ...): the best compiled target allowed by max_isa().
const char* simd_target();
/// What MIXPREC_ISA asked for and what runs instead, if the two differ (an unknown value, or a
/// level this CPU lacks); empty otherwise. The same text is printed once to stderr as a warning.
std::string isa_env_warning();

}  // namespace mixprec
