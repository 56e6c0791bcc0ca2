#pragma once
/// The table of CPU classes: one row per kind of CPU mixprec is written for, with the features
/// detection reports on it and everything mixprec is expected to decide there (the SIMD levels,
/// the Highway target each level runs, oneDNN's ISA, the bf16 GEMM route, what `auto` and
/// `auto-layer` pick). It is the single source of every CPU-dependent expectation:
///
///  - MIXPREC_CPU_PROFILE=NAME makes cpu_features() report the row's features, so the decision
///    logic (levels, auto precision, routes, log lines) behaves as on that class, while what
///    executes stays capped to the real CPU (cpu_features.h: executed_isa()).
///  - Tests take their expectations from the row of the class in force (the profile's, or the
///    row the real CPU is classified as), never from the machine they were written on; a test
///    checks every row against the decision logic on every machine.
///
/// The expectations are written out per row, not derived from the features by the library's
/// own rules, so a change to a rule that moves a class's outcome fails a test.
#include <span>
#include <string>
#include <string_view>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/dtype.h"

namespace mixprec {

/// One SIMD level of a class and the Highway target it runs there. `target` may list
/// alternatives separated by '|' where the choice depends on the vector length the CPU reports
/// ("SVE_256|SVE": Highway's fixed-width SVE_256 target on 256-bit hardware, plain SVE on others).
struct CpuClassLevel {
  Isa level;
  const char* target;
};

enum class CpuArch { x86_64, arm64 };

struct CpuClass {
  const char* name;     ///< the MIXPREC_CPU_PROFILE value, e.g. "zen4"
  const char* summary;  ///< what it is, with example CPUs
  CpuArch arch;
  CpuFeatures features;  ///< what detection reports on such a CPU
  /// The capping levels, lowest first (supported_isas()), each with its Highway target.
  std::span<const CpuClassLevel> levels;
  /// oneDNN's ISA as onednn_description() names it, uncapped ('|' separates alternatives;
  /// "aarch64" on arm64, where oneDNN has no ISA levels to report).
  const char* onednn_isa;
  /// What `--precision auto` picks ("fp32" or "bf16") and a phrase its reason must contain.
  const char* auto_precision;
  const char* auto_reason_mentions;
  /// The compute dtype `--precision auto-layer` starts every layer in.
  DType layer_compute;
  /// Whether bf16 GEMMs go to oneDNN as bf16 by default (the automatic route): only where the
  /// CPU has native bf16 dot products that oneDNN 2.6 uses.
  bool bf16_gemm_native;
  /// Whether `mixprec bench` and the bf16 modes say why 16-bit steps cannot be much faster
  /// here (no native bf16 GEMM).
  bool bf16_speedup_limited;

  Isa best_level() const { return levels.back().level; }
  /// The target(s) `level` runs on this class; nullptr when the class has no such level.
  const char* target_at(Isa level) const;
};

/// Every class, x86-64 first. Names are unique.
std::span<const CpuClass> cpu_classes();
/// The class named `name`, or nullptr.
const CpuClass* find_cpu_class(std::string_view name);
/// "zen2, skylake-sp, ...": the names, for messages.
std::string cpu_class_names();
/// The class these features belong to: the row whose features match on every flag that steers
/// a decision; else the nearest row of the same architecture and best level (fewest differing
/// flags). Never null on x86-64 or arm64.
const CpuClass& classify_cpu(const CpuFeatures& features);
/// The class the decision logic sees now: the MIXPREC_CPU_PROFILE row, or the real CPU's class.
const CpuClass& reported_cpu_class();
/// The class of the real CPU (what executes), whatever the profile says.
const CpuClass& hardware_cpu_class();
/// Whether `target` (a Highway target name) is one of the '|'-separated names in `expected`.
bool target_matches(std::string_view expected, std::string_view target);

}  // namespace mixprec
