#pragma once
/// Precision modes and the precision policy: which dtype parameters are stored in, which dtype
/// compute runs in, which dtype outputs come back in, per model and per module.
#include <map>
#include <string>
#include <string_view>

#include "mixprec/core/cpu_features.h"
#include "mixprec/core/gpu.h"
#include "mixprec/core/dtype.h"

namespace mixprec::nn {
class Module;
}

namespace mixprec::amp {

/// The training precision modes.
enum class PrecisionMode : std::uint8_t {
  fp32,          ///< everything in f32
  bf16,          ///< f32 parameters, bf16 compute under autocast
  fp16,          ///< f32 parameters, f16 compute under autocast, always with a GradScaler
  pure_bf16,     ///< bf16 parameters, f32 master copy inside the optimizer
  pure_bf16_sr,  ///< bf16 parameters, no master copy, stochastic rounding of the update
  automatic,     ///< "auto": chosen from the CPU (see choose_precision)
  /// "auto-layer": f32 parameters, and a compute dtype per layer (fp16, bf16 or fp32) that the
  /// precision autopilot (train/precision_autopilot.h) moves up and down from statistics of
  /// the run, with a GradScaler; or replays a layer policy file.
  auto_layer,
  /// "fp8": f32 parameters, bf16 autocast, and the Linears the fp8 policy picks
  /// (nn/fp8_layers.h) run fp8 GEMMs with current scaling (each tensor's own amax).
  fp8,
  /// "fp8-delayed": as fp8, with delayed scaling (the largest amax of a history of steps).
  fp8_delayed,
};

/// "fp32", "bf16", "fp16", "pure-bf16", "pure-bf16-sr", "auto", "auto-layer", "fp8",
/// "fp8-delayed".
const char* name(PrecisionMode mode);
/// Parses the names above; ValueError listing them otherwise.
PrecisionMode parse_precision_mode(std::string_view text);
/// True for the fp8 recipes (fp8, fp8-delayed).
inline bool is_fp8(PrecisionMode mode) {
  return mode == PrecisionMode::fp8 || mode == PrecisionMode::fp8_delayed;
}

/// Parameter, compute and output dtypes. String form "p=f32,c=bf16,o=f32".
struct DTypes {
  DType param = DType::f32;
  DType compute = DType::f32;
  DType output = DType::f32;
  bool operator==(const DTypes&) const = default;
};

/// A precision policy: model-wide dtypes plus overrides for modules selected by path prefix
/// ("features.3") or by type ("type:LayerNorm"), e.g. to keep normalisation layers in f32.
struct PrecisionPolicy {
  DTypes dtypes;
  std::map<std::string, DTypes> overrides;

  /// Parses "p=f32,c=bf16,o=f32" (each key once, any order, missing keys f32); ValueError otherwise.
  static PrecisionPolicy parse(std::string_view text);
  /// The policy of a precision mode (pure modes keep modules of type BatchNorm*/LayerNorm in f32
  /// when keep_norm_fp32 is true).
  static PrecisionPolicy for_mode(PrecisionMode mode, bool keep_norm_fp32 = true);
  /// "p=f32,c=bf16,o=f32" (overrides are not part of the string form).
  std::string to_string() const;
  /// Dtypes for a module with this path and type name (the most specific override wins:
  /// the longest matching path prefix, then the type).
  DTypes resolve(const std::string& path, const std::string& type_name) const;
};

/// Casts every parameter of module (and its children) in place to the parameter dtype the policy
/// gives its module; call before creating the optimizer. Buffers stay f32.
void apply_parameter_dtypes(nn::Module& module, const PrecisionPolicy& policy);

/// The result of choosing a mode for a CPU: the mode and why, in one sentence per point.
struct PrecisionChoice {
  PrecisionMode mode;
  std::string reason;
};
/// The "auto" rule: bf16 where the CPU has native bf16 dot products (AVX512_BF16 or AMX-BF16),
/// else fp32 (bf16 would only be emulated: slower than fp32 for compute).
PrecisionChoice choose_precision(const CpuFeatures& cpu);
/// The "auto" rule on an NVIDIA GPU (the seeds' table by generation): bf16 from sm_80 (Ampere:
/// bf16 Tensor Cores, fp32's range, no scaler); fp16 with the GradScaler on sm_70 to sm_75
/// (Volta, Turing: fp16 Tensor Cores only); fp32 below (no Tensor Cores).
PrecisionChoice choose_precision(const GpuInfo& gpu);
/// Why `gpu` cannot train in an fp8 recipe (fp8, fp8-delayed), in one sentence naming the GPU
/// and the alternatives; empty when it can (fp8 Tensor Cores: sm_89 and newer).
std::string fp8_refusal(const GpuInfo& gpu);
/// The 16-bit dtype auto-layer starts its layers in when --compute is not given: f16 where the
/// CPU has native fp16 arithmetic but no native bf16 dot products (AVX512_FP16 or Armv8.2
/// FP16 without BF16), else bf16 (its range spares most layers the GradScaler's trial and error).
DType default_layer_compute(const CpuFeatures& cpu);

/// Checks a mode against the run's set-up and returns warnings to show the user (empty if none):
/// fp16 without a GradScaler, fp16/bf16 on CPUs without native support for them.
std::string precision_warnings(PrecisionMode mode, bool has_grad_scaler, const CpuFeatures& cpu);

}  // namespace mixprec::amp
