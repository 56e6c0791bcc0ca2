#include "mixprec/core/cpu_features.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace mixprec {
namespace {

std::uint64_t read_xcr0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
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

Isa detected_isa() {
  const CpuFeatures& f = cpu_features();
  const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c;
  if (avx512 && f.avx512_bf16) return Isa::avx512_bf16;
  if (avx512) return Isa::avx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::avx2;
  return Isa::scalar;
}

Isa isa_from_env(Isa fallback) {
  const char* v = std::getenv("MIXPREC_ISA");
  if (v == nullptr) return fallback;
  const std::string_view s(v);
  if (s == "scalar") return Isa::scalar;
  if (s == "avx2") return Isa::avx2;
  if (s == "avx512") return Isa::avx512;
  if (s == "avx512_bf16") return Isa::avx512_bf16;
  return fallback;
}

std::atomic<int>& isa_cap() {
  static std::atomic<int> cap{static_cast<int>(isa_from_env(Isa::avx512_bf16))};
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
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

Isa max_isa() {
  static const Isa detected = detected_isa();
  const Isa cap = static_cast<Isa>(isa_cap().load(std::memory_order_relaxed));
  return cap < detected ? cap : detected;
}

void set_max_isa(Isa cap) { isa_cap().store(static_cast<int>(cap), std::memory_order_relaxed); }

const char* name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

}  // namespace mixprec
