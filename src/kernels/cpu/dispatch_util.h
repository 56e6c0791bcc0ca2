#pragma once
/// Helpers shared by the dispatching kernel files (cpu/*.cpp): verbose log lines naming the
/// Highway target or the reason for the reference, parallel loops above a size threshold, and
/// byte offsets into untyped buffers.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/parallel_chunks.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/verbose.h"

namespace mixprec::kernels::cpu {

using mixprec::kParallelMinWork;
using mixprec::parallel_chunks;
using mixprec::parallel_for;

/// Why faster vector code than what runs now is not running (the ISA cap, or a simulated CPU
/// class the real one cannot execute), or empty.
inline std::string simd_cap_reason() {
  std::string why;
  const Isa best = supported_isas().back();
  if (max_isa() != best) {
    why = std::string("capped at ") + name(max_isa()) + " by MIXPREC_ISA/set_max_isa (CPU has " +
          name(best) + ")";
  }
  if (executed_isa() != max_isa()) {
    if (!why.empty()) why += "; ";
    why += std::string("MIXPREC_CPU_PROFILE=") + cpu_profile() + " allows " + name(max_isa()) +
           ", the real CPU executes " + name(executed_isa());
  }
  return why;
}

/// One verbose line for a kernel call that ran the Highway vector code: names the target
/// ("AVX2", "AVX3", "NEON", "EMU128", ...) and the cap, if any.
inline void log_simd(std::string_view op, const std::string& dtype) {
  if (!verbose_enabled()) return;
  verbose_log(op, dtype, simd_target(), simd_cap_reason());
}

/// One verbose line for a kernel call that ran the scalar reference loops, with the reason
/// (e.g. "no vector kernel for fp8 storage").
inline void log_reference(std::string_view op, const std::string& dtype, std::string_view why) {
  if (!verbose_enabled()) return;
  verbose_log(op, dtype, "reference", why);
}

/// "bf16", or "bf16->f32" when the output dtype differs.
inline std::string dtype_label(DType in, DType out) {
  std::string s = name(in);
  if (out != in) s.append("->").append(name(out));
  return s;
}

/// p advanced by i elements of dtype.
inline const void* at(const void* p, DType dtype, std::int64_t i) {
  return static_cast<const char*>(p) + i * static_cast<std::int64_t>(size_of(dtype));
}
inline void* at(void* p, DType dtype, std::int64_t i) {
  return static_cast<char*>(p) + i * static_cast<std::int64_t>(size_of(dtype));
}

/// Element i of a buffer of dtype, widened to f32 (exact).
inline float load_f32(const void* p, DType dtype, std::int64_t i) {
  return dispatch(dtype, [&](auto t) {
    return static_cast<float>(static_cast<const decltype(t)*>(p)[i]);
  });
}

}  // namespace mixprec::kernels::cpu
