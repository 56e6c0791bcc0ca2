// CPU feature detection for x86-64 (cpuid/xgetbv) and arm64 (getauxval), and the ISA cap that
// steers Highway's run-time dispatch. Nothing x86-specific is compiled on other architectures.
#include "mixprec/core/cpu_features.h"

#include "mixprec/core/cpu_class.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MIXPREC_X86 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#define MIXPREC_ARM64 1
#endif

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "hwy/highway.h"
#include "hwy/targets.h"

namespace mixprec {
namespace {

#if defined(MIXPREC_X86)
std::uint64_t read_xcr0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.sse4 = ((c >> 9) & 1) && ((c >> 19) & 1) && ((c >> 20) & 1) && ((c >> 23) & 1);
  const bool osxsave = (c >> 27) & 1;
  const bool has_avx = (c >> 28) & 1;
  const bool fma = (c >> 12) & 1;
  const bool f16c = (c >> 29) & 1;
  if (!osxsave || !has_avx) return f;
  const std::uint64_t xcr0 = read_xcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  const bool amx_state = (xcr0 & 0x60000) == 0x60000;
  f.fma = fma && ymm_state;
  f.f16c = f16c && ymm_state;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ((b >> 5) & 1) && ymm_state;
    f.avx512f = ((b >> 16) & 1) && zmm_state;
    f.avx512dq = ((b >> 17) & 1) && zmm_state;
    f.avx512bw = ((b >> 30) & 1) && zmm_state;
    f.avx512vl = ((b >> 31) & 1) && zmm_state;
    f.avx512_fp16 = ((d >> 23) & 1) && zmm_state;
    f.amx_bf16 = ((d >> 22) & 1) && amx_state;
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    if (a >= 1 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) {
      f.avx512_bf16 = ((a1 >> 5) & 1) && zmm_state;
    }
  }
  return f;
}
#elif defined(MIXPREC_ARM64)
CpuFeatures detect() {
  // Bit positions of the Linux arm64 hwcaps (asm/hwcap.h), spelled out so that an older
  // libc header does not hide a feature.
  constexpr unsigned long kHwcapAsimd = 1ul << 1, kHwcapAsimdHp = 1ul << 10,
                          kHwcapSve = 1ul << 22;
  constexpr unsigned long kHwcap2Sve2 = 1ul << 1, kHwcap2Bf16 = 1ul << 14;
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
  CpuFeatures f;
  f.neon = (hw & kHwcapAsimd) != 0;
  f.arm_fp16 = (hw & kHwcapAsimdHp) != 0;
  f.sve = (hw & kHwcapSve) != 0;
  f.sve2 = f.sve && (hw2 & kHwcap2Sve2) != 0;
  f.arm_bf16 = (hw2 & kHwcap2Bf16) != 0;
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

bool is_x86(Isa isa) { return isa >= Isa::sse4 && isa <= Isa::avx512_bf16; }
bool is_arm(Isa isa) { return isa >= Isa::neon && isa <= Isa::sve2; }
bool same_arch(Isa a, Isa b) {
  return a == Isa::scalar || b == Isa::scalar || (is_x86(a) && is_x86(b)) ||
         (is_arm(a) && is_arm(b));
}

const CpuFeatures& hardware() {
  static const CpuFeatures f = detect();
  return f;
}

std::string& profile_warning() {
  static std::string w;
  return w;
}

/// The MIXPREC_CPU_PROFILE class, or nullptr (unset, or unknown: then one warning).
const CpuClass* profile_class() {
  static const CpuClass* const c = []() -> const CpuClass* {
    const char* v = std::getenv("MIXPREC_CPU_PROFILE");
    if (v == nullptr || *v == '\0') return nullptr;
    const CpuClass* found = find_cpu_class(v);
    if (found == nullptr) {
      profile_warning() = std::string("MIXPREC_CPU_PROFILE=") + v +
                          " is not a known CPU class (known: " + cpu_class_names() +
                          "); using this CPU as it is (" + hardware().to_string() + ")";
      std::fprintf(stderr, "mixprec: warning: %s\n", profile_warning().c_str());
    }
    return found;
  }();
  return c;
}

/// The best level of the CPU the decision logic sees (the profile's, else the real one).
Isa detected() {
  static const Isa d = best_isa_of(cpu_features());
  return d;
}

/// The best level the real CPU executes.
Isa hardware_best() {
  static const Isa d = best_isa_of(hardware());
  return d;
}

/// The level a cap leaves on this CPU: the cap itself when the CPU has it, else the best level
/// of this CPU's architecture below it (everything the CPU has for a cap of another architecture).
Isa effective(Isa cap) {
  const Isa best = detected();
  if (!same_arch(cap, best)) return best;
  return cap < best ? cap : best;
}

/// The level that really executes for a (reported) level: the same one where the hardware has
/// it, else the best the hardware has below it; a level of another architecture (an arm64
/// profile on x86-64) runs the hardware's best. Never more than the hardware has.
Isa executed_level(Isa level) {
  const Isa hw = hardware_best();
  if (level == Isa::scalar) return Isa::scalar;
  if (!same_arch(level, hw)) return hw;
  return level < hw ? level : hw;
}

/// Highway targets a level allows (EMU128/SCALAR, the portable fallback, always).
std::int64_t highway_mask(Isa level) {
  std::int64_t m = HWY_EMU128 | HWY_SCALAR;
  switch (level) {
    case Isa::avx512_bf16:
    case Isa::avx512: m |= HWY_AVX3 | HWY_AVX3_DL; [[fallthrough]];
    case Isa::avx2: m |= HWY_AVX2; [[fallthrough]];
    case Isa::sse4: m |= HWY_SSSE3 | HWY_SSE4; break;
    case Isa::sve2: m |= HWY_SVE2 | HWY_SVE2_128; [[fallthrough]];
    case Isa::sve: m |= HWY_SVE | HWY_SVE_256; [[fallthrough]];
    case Isa::neon: m |= HWY_NEON; break;
    case Isa::scalar: break;
  }
  return m;
}

std::mutex& highway_mutex() {
  static std::mutex m;
  return m;
}

/// Makes Highway's dispatch choose among the targets `level` allows from now on.
void apply_to_highway(Isa level) {
  std::lock_guard<std::mutex> lock(highway_mutex());
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU really supports
  std::int64_t allowed = hwy::SupportedTargets() & highway_mask(executed_level(level));
  if (allowed == 0) allowed = HWY_STATIC_TARGET;
  hwy::SetSupportedTargetsForTest(allowed);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

std::string& env_warning() {
  static std::string w;
  return w;
}

/// The cap from MIXPREC_ISA (with a warning for a value that is unknown or that this CPU
/// cannot run), or the best this CPU has.
Isa cap_from_env() {
  const char* v = std::getenv("MIXPREC_ISA");
  const Isa best = detected();
  if (v == nullptr || *v == '\0') return best;
  const std::optional<Isa> asked = parse_isa(v);
  std::string& w = env_warning();
  if (!asked) {
    w = std::string("MIXPREC_ISA=") + v +
        " is not a known level (scalar, sse4, avx2, avx512, avx512_bf16, neon, sve, sve2); running " +
        name(best);
  } else if (effective(*asked) != *asked) {
    w = std::string("MIXPREC_ISA=") + v + " names a level this CPU lacks (it has: " +
        cpu_features().to_string() + "); running " + name(effective(*asked));
  }
  if (!w.empty()) std::fprintf(stderr, "mixprec: warning: %s\n", w.c_str());
  return asked ? effective(*asked) : best;
}

std::atomic<int>& cap_store() {
  static std::atomic<int> cap{[] {
    const Isa c = cap_from_env();
    apply_to_highway(c);
    return static_cast<int>(c);
  }()};
  return cap;
}

}  // namespace

std::string CpuFeatures::to_string() const {
  std::string s;
  auto add = [&](bool on, const char* n) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += n;
  };
  add(sse4, "sse4");
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_fp16, "avx512_fp16");
  add(amx_bf16, "amx_bf16");
  add(neon, "neon");
  add(arm_fp16, "fp16");
  add(arm_bf16, "bf16");
  add(sve, "sve");
  add(sve2, "sve2");
  return s.empty() ? "none" : s;
}

const CpuFeatures& cpu_features() {
  const CpuClass* profile = profile_class();
  return profile != nullptr ? profile->features : hardware();
}

const CpuFeatures& hardware_cpu_features() { return hardware(); }

const std::string& cpu_profile() {
  static const std::string name = profile_class() != nullptr ? profile_class()->name : "";
  return name;
}

std::string cpu_profile_warning() {
  (void)profile_class();
  return profile_warning();
}

Isa best_isa_of(const CpuFeatures& f) {
  const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx2 && f.fma &&
                      f.f16c;
  if (avx512 && f.avx512_bf16) return Isa::avx512_bf16;
  if (avx512) return Isa::avx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::avx2;
  if (f.sse4) return Isa::sse4;
  if (f.sve2) return Isa::sve2;
  if (f.sve) return Isa::sve;
  if (f.neon) return Isa::neon;
  return Isa::scalar;
}

std::vector<Isa> isa_levels_of(const CpuFeatures& f) {
  std::vector<Isa> out{Isa::scalar};
  const Isa best = best_isa_of(f);
  for (int i = static_cast<int>(Isa::sse4); i <= static_cast<int>(Isa::sve2); ++i) {
    const auto level = static_cast<Isa>(i);
    if (same_arch(level, best) && level <= best) out.push_back(level);
  }
  return out;
}

Isa executed_isa() { return executed_level(max_isa()); }

Isa hardware_isa() { return hardware_best(); }

Isa max_isa() { return static_cast<Isa>(cap_store().load(std::memory_order_relaxed)); }

bool isa_allowed(Isa level) {
  const Isa cap = max_isa();
  return level == Isa::scalar || (same_arch(level, cap) && cap != Isa::scalar && level <= cap);
}

void set_max_isa(Isa cap) {
  const Isa level = effective(cap);
  cap_store().store(static_cast<int>(level), std::memory_order_relaxed);
  apply_to_highway(level);
}

std::vector<Isa> supported_isas() { return isa_levels_of(cpu_features()); }

const char* name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::sse4: return "sse4";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
    case Isa::neon: return "neon";
    case Isa::sve: return "sve";
    case Isa::sve2: return "sve2";
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(Isa::sve2); ++i) {
    if (s == name(static_cast<Isa>(i))) return static_cast<Isa>(i);
  }
  return std::nullopt;
}

const char* simd_target() {
  (void)max_isa();  // applies MIXPREC_ISA to Highway on first use
  std::lock_guard<std::mutex> lock(highway_mutex());
  const std::int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  if (targets == 0) return hwy::TargetName(HWY_STATIC_TARGET);
  return hwy::TargetName(targets & -targets);  // lowest bit = best target
}

std::string isa_env_warning() {
  (void)max_isa();
  return env_warning();
}

}  // namespace mixprec

namespace mixprec {
namespace {
// Applies MIXPREC_ISA to Highway when the library loads, before any kernel can dispatch.
[[maybe_unused]] const int kApplyCapAtLoad = static_cast<int>(max_isa());
}  // namespace
}  // namespace mixprec
