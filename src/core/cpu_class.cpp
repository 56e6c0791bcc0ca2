// The table of CPU classes (cpu_class.h). Each row states what mixprec is expected to do on that
// class; tests/core/test_cpu_class.cpp checks every row against the decision logic on every
// machine, and the CPU-dependent tests take their expectations from the row in force.
#include "mixprec/core/cpu_class.h"

#include <array>
#include <limits>

namespace mixprec {
namespace {

// Highway targets of this build (CMakeLists.txt: SSSE3 disabled, AVX3_DL not compiled, so
// avx512 and avx512_bf16 both run AVX3; SCALAR kept by HWY_COMPILE_ALL_ATTAINABLE).
constexpr CpuClassLevel kSse4Levels[] = {{Isa::scalar, "SCALAR"}, {Isa::sse4, "SSE4"}};
constexpr CpuClassLevel kAvx2Levels[] = {
    {Isa::scalar, "SCALAR"}, {Isa::sse4, "SSE4"}, {Isa::avx2, "AVX2"}};
constexpr CpuClassLevel kAvx512Levels[] = {
    {Isa::scalar, "SCALAR"}, {Isa::sse4, "SSE4"}, {Isa::avx2, "AVX2"}, {Isa::avx512, "AVX3"}};
constexpr CpuClassLevel kAvx512Bf16Levels[] = {{Isa::scalar, "SCALAR"},
                                               {Isa::sse4, "SSE4"},
                                               {Isa::avx2, "AVX2"},
                                               {Isa::avx512, "AVX3"},
                                               {Isa::avx512_bf16, "AVX3"}};
constexpr CpuClassLevel kNeonLevels[] = {{Isa::scalar, "SCALAR"}, {Isa::neon, "NEON"}};
// Highway prefers its fixed-width SVE_256 / SVE2_128 targets where the vector length matches
// (Neoverse V1: 256 bits; N2/V2: 128 bits) and runs plain SVE / SVE2 elsewhere (qemu).
constexpr CpuClassLevel kSveLevels[] = {
    {Isa::scalar, "SCALAR"}, {Isa::neon, "NEON"}, {Isa::sve, "SVE_256|SVE"}};
constexpr CpuClassLevel kSve2Levels[] = {{Isa::scalar, "SCALAR"},
                                         {Isa::neon, "NEON"},
                                         {Isa::sve, "SVE_256|SVE"},
                                         {Isa::sve2, "SVE2_128|SVE2"}};

CpuFeatures x86(bool avx2, bool avx512, bool avx512_bf16, bool spr) {
  CpuFeatures f;
  f.sse4 = true;
  f.avx2 = f.fma = f.f16c = avx2;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = avx512;
  f.avx512_bf16 = avx512_bf16;
  f.avx512_fp16 = f.amx_bf16 = spr;
  return f;
}

CpuFeatures arm(bool fp16, bool bf16, bool sve, bool sve2) {
  CpuFeatures f;
  f.neon = true;
  f.arm_fp16 = fp16;
  f.arm_bf16 = bf16;
  f.sve = sve;
  f.sve2 = sve2;
  return f;
}

constexpr const char* kNoNativeBf16 = "no native bf16 dot products";

const std::array<CpuClass, 8>& table() {
  static const std::array<CpuClass, 8> rows = {{
      {"x86-64-v2", "x86-64 with SSE4.2 and no AVX2 (Intel Nehalem to Ivy Bridge, AMD Bulldozer)",
       CpuArch::x86_64, x86(false, false, false, false), kSse4Levels, "isa below avx2", "fp32",
       kNoNativeBf16, DType::bf16, false, true},
      {"zen2", "x86-64 AVX2 with FMA and F16C (AMD Zen 2/3, Intel Haswell to Alder Lake)",
       CpuArch::x86_64, x86(true, false, false, false), kAvx2Levels, "isa avx2", "fp32",
       kNoNativeBf16, DType::bf16, false, true},
      {"skylake-sp", "x86-64 AVX-512 without BF16 (Intel Skylake-SP, Cascade Lake, Ice Lake)",
       CpuArch::x86_64, x86(true, true, false, false), kAvx512Levels,
       "isa avx512_core|isa avx512_core_vnni", "fp32", kNoNativeBf16, DType::bf16, false, true},
      {"zen4", "x86-64 AVX-512 with AVX512_BF16 (AMD Zen 4/5, Intel Cooper Lake)",
       CpuArch::x86_64, x86(true, true, true, false), kAvx512Bf16Levels,
       "isa avx512_core_bf16", "bf16", "AVX512_BF16", DType::bf16, true, false},
      {"sapphire-rapids",
       "x86-64 AVX-512 with AVX512_BF16, AVX512_FP16 and AMX (Intel Sapphire/Emerald/Granite Rapids)",
       CpuArch::x86_64, x86(true, true, true, true), kAvx512Bf16Levels, "isa avx512_core_amx",
       "bf16", "AMX-BF16", DType::bf16, true, false},
      {"arm64-neon", "arm64 NEON with FP16 arithmetic, no SVE or BF16 (Neoverse N1, Graviton 2)",
       CpuArch::arm64, arm(true, false, false, false), kNeonLevels, "aarch64", "fp32",
       kNoNativeBf16, DType::f16, false, true},
      {"graviton3", "arm64 SVE (256-bit) with BF16 and FP16, no SVE2 (Neoverse V1, Graviton 3)",
       CpuArch::arm64, arm(true, true, true, false), kSveLevels, "aarch64", "fp32",
       "no bf16 GEMM for arm64", DType::bf16, false, true},
      {"arm64-sve2", "arm64 SVE2 with BF16 and FP16 (Neoverse N2/V2, Graviton 4, qemu's max CPU)",
       CpuArch::arm64, arm(true, true, true, true), kSve2Levels, "aarch64", "fp32",
       "no bf16 GEMM for arm64", DType::bf16, false, true},
  }};
  return rows;
}

bool is_arm(const CpuFeatures& f) { return f.neon; }

/// The flags of a CpuFeatures, in one fixed order, for comparing two of them.
std::array<bool, 16> flags(const CpuFeatures& f) {
  return {f.sse4,        f.avx2,        f.fma,      f.f16c,     f.avx512f, f.avx512bw,
          f.avx512vl,    f.avx512dq,    f.avx512_bf16, f.avx512_fp16, f.amx_bf16, f.neon,
          f.sve,         f.sve2,        f.arm_bf16, f.arm_fp16};
}

int distance(const CpuFeatures& a, const CpuFeatures& b) {
  const auto fa = flags(a), fb = flags(b);
  int d = 0;
  for (std::size_t i = 0; i < fa.size(); ++i) d += fa[i] != fb[i];
  return d;
}

}  // namespace

const char* CpuClass::target_at(Isa level) const {
  for (const CpuClassLevel& l : levels) {
    if (l.level == level) return l.target;
  }
  return nullptr;
}

std::span<const CpuClass> cpu_classes() { return table(); }

const CpuClass* find_cpu_class(std::string_view name) {
  for (const CpuClass& c : table()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string cpu_class_names() {
  std::string s;
  for (const CpuClass& c : table()) {
    if (!s.empty()) s += ", ";
    s += c.name;
  }
  return s;
}

const CpuClass& classify_cpu(const CpuFeatures& features) {
  const CpuClass* best = nullptr;
  int best_distance = std::numeric_limits<int>::max();
  const Isa level = best_isa_of(features);
  for (const CpuClass& c : table()) {
    if ((c.arch == CpuArch::arm64) != is_arm(features)) continue;
    // A class of the same best level always beats one of another level: the levels and
    // targets a test expects follow from it.
    const int d = distance(c.features, features) + (c.best_level() == level ? 0 : 100);
    if (d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  // A CPU with neither x86 SSE4 nor arm64 NEON (no such CPU runs mixprec) is treated as the
  // most basic x86-64 class.
  return best != nullptr ? *best : table().front();
}

const CpuClass& reported_cpu_class() {
  const std::string& profile = cpu_profile();
  if (!profile.empty()) return *find_cpu_class(profile);
  return classify_cpu(cpu_features());
}

const CpuClass& hardware_cpu_class() { return classify_cpu(hardware_cpu_features()); }

bool target_matches(std::string_view expected, std::string_view target) {
  while (true) {
    const std::size_t bar = expected.find('|');
    if (expected.substr(0, bar) == target) return true;
    if (bar == std::string_view::npos) return false;
    expected.remove_prefix(bar + 1);
  }
}

}  // namespace mixprec
