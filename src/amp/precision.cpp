#include "kernels/convert.h"
#include "mixprec/amp/precision.h"

#include <sstream>
#include <vector>

#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/nn/module.h"

namespace mixprec::amp {

const char* name(PrecisionMode mode) {
  switch (mode) {
    case PrecisionMode::fp32: return "fp32";
    case PrecisionMode::bf16: return "bf16";
    case PrecisionMode::fp16: return "fp16";
    case PrecisionMode::pure_bf16: return "pure-bf16";
    case PrecisionMode::pure_bf16_sr: return "pure-bf16-sr";
    case PrecisionMode::automatic: return "auto";
    case PrecisionMode::auto_layer: return "auto-layer";
    case PrecisionMode::fp8: return "fp8";
    case PrecisionMode::fp8_delayed: return "fp8-delayed";
  }
  return "?";
}

PrecisionMode parse_precision_mode(std::string_view text) {
  for (PrecisionMode m : {PrecisionMode::fp32, PrecisionMode::bf16, PrecisionMode::fp16,
                          PrecisionMode::pure_bf16, PrecisionMode::pure_bf16_sr,
                          PrecisionMode::automatic, PrecisionMode::auto_layer, PrecisionMode::fp8,
                          PrecisionMode::fp8_delayed}) {
    if (text == name(m)) return m;
  }
  MIXPREC_CHECK(false, ValueError, "precision",
                "unknown precision '" << text
                                      << "'; use one of fp32, bf16, fp16, pure-bf16, pure-bf16-sr, auto, auto-layer, fp8, fp8-delayed");
  return PrecisionMode::fp32;
}

PrecisionPolicy PrecisionPolicy::parse(std::string_view text) {
  PrecisionPolicy policy;
  bool seen[3] = {false, false, false};
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    const std::size_t eq = item.find('=');
    MIXPREC_CHECK(eq != std::string_view::npos && eq > 0, ValueError, "PrecisionPolicy",
                  "cannot parse '" << item << "' in '" << text
                                   << "'; expected items like p=f32,c=bf16,o=f32");
    const std::string_view key = item.substr(0, eq);
    const DType dtype = parse_dtype(item.substr(eq + 1));
    MIXPREC_CHECK(!is_storage_only(dtype), ValueError, "PrecisionPolicy",
                  name(dtype) << " in '" << text << "' is a storage-only dtype; precision "
                              << "policies take f32, bf16 and f16 (fp8 tensors are created "
                                 "with .to() and multiplied with matmul/linear)");
    int index = key == "p" ? 0 : key == "c" ? 1 : key == "o" ? 2 : -1;
    MIXPREC_CHECK(index >= 0, ValueError, "PrecisionPolicy",
                  "unknown key '" << key << "' in '" << text << "'; keys are p (parameters), c (compute), o (output)");
    MIXPREC_CHECK(!seen[index], ValueError, "PrecisionPolicy", "key '" << key << "' given twice in '" << text << "'");
    seen[index] = true;
    (index == 0 ? policy.dtypes.param : index == 1 ? policy.dtypes.compute : policy.dtypes.output) = dtype;
    pos = comma + 1;
  }
  return policy;
}

PrecisionPolicy PrecisionPolicy::for_mode(PrecisionMode mode, bool keep_norm_fp32) {
  PrecisionPolicy p;
  switch (mode) {
    case PrecisionMode::fp32: break;
    case PrecisionMode::bf16:
    // fp8: the compute around the fp8 GEMMs is bf16 autocast, as Transformer Engine runs
    case PrecisionMode::fp8:
    case PrecisionMode::fp8_delayed:
      p.dtypes.compute = DType::bf16;
      break;
    case PrecisionMode::fp16: p.dtypes.compute = DType::f16; break;
    case PrecisionMode::pure_bf16:
    case PrecisionMode::pure_bf16_sr:
      p.dtypes = {DType::bf16, DType::bf16, DType::f32};
      if (keep_norm_fp32) {
        for (const char* type : {"type:BatchNorm1d", "type:BatchNorm2d", "type:LayerNorm"}) {
          p.overrides[type] = {DType::f32, DType::f32, DType::f32};
        }
      }
      break;
    case PrecisionMode::automatic:
      return for_mode(choose_precision(cpu_features()).mode, keep_norm_fp32);
    case PrecisionMode::auto_layer:
      // The starting compute dtype; the autopilot sets each layer's own on top of it.
      p.dtypes.compute = default_layer_compute(cpu_features());
      break;
  }
  return p;
}

std::string PrecisionPolicy::to_string() const {
  std::ostringstream os;
  os << "p=" << name(dtypes.param) << ",c=" << name(dtypes.compute) << ",o=" << name(dtypes.output);
  return os.str();
}

DTypes PrecisionPolicy::resolve(const std::string& path, const std::string& type_name) const {
  std::size_t best = 0;
  const DTypes* found = nullptr;
  for (const auto& [key, value] : overrides) {
    if (key.rfind("type:", 0) == 0) continue;
    const bool prefix = path.rfind(key, 0) == 0 && (path.size() == key.size() || path[key.size()] == '.');
    if (prefix && key.size() >= best) {
      best = key.size();
      found = &value;
    }
  }
  if (found != nullptr) return *found;
  auto it = overrides.find("type:" + type_name);
  return it != overrides.end() ? it->second : dtypes;
}

namespace {

// Re-stores a tensor in another dtype, in place: every handle (the module's, an optimizer's)
// sees the new dtype because they share the TensorImpl.
void retype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return;
  MIXPREC_CHECK(t.is_contiguous(), ValueError, "apply_parameter_dtypes", "parameters must be contiguous");
  detail::TensorImpl& impl = t.impl();
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(t.numel()) * size_of(dtype),
                                           impl.storage->category());
  kernels::convert(t.data_ptr(), t.dtype(), storage->data(), dtype,
                   static_cast<std::size_t>(t.numel()));
  impl.storage = std::move(storage);
  impl.offset = 0;
  impl.dtype = dtype;
  impl.grad.reset();
}

void apply(nn::Module& module, const std::string& path, const PrecisionPolicy& policy) {
  const DTypes d = policy.resolve(path, module.type_name());
  for (const auto& [local, t] : module.local_parameters()) retype(t, d.param);
  if (d.compute != policy.dtypes.compute) module.set_compute_dtype(d.compute);
  for (const auto& [child_name, child] : module.children()) {
    apply(*child, nn::join_path(path, child_name), policy);
  }
}

}  // namespace

void apply_parameter_dtypes(nn::Module& module, const PrecisionPolicy& policy) {
  std::vector<DTypes> all{policy.dtypes};
  for (const auto& [key, d] : policy.overrides) all.push_back(d);
  for (const DTypes& d : all) {
    for (DType t : {d.param, d.compute, d.output}) {
      require_compute_dtype("apply_parameter_dtypes", t);
    }
  }
  apply(module, "", policy);
}

PrecisionChoice choose_precision(const CpuFeatures& cpu) {
  if (cpu.amx_bf16 || cpu.avx512_bf16) {
    return {PrecisionMode::bf16,
            std::string("bf16: this CPU has native bf16 dot products (") +
                (cpu.amx_bf16 ? "AMX-BF16" : "AVX512_BF16") +
                "), so GEMMs run about 2x faster than fp32; bf16 keeps fp32's range, so no loss "
                "scaling is needed"};
  }
  if (cpu.arm_bf16) {
    return {PrecisionMode::fp32,
            "fp32: this CPU has bf16 instructions (BFDOT/BFMMLA), but oneDNN 2.6 has no bf16 GEMM "
            "for arm64 that uses them, so bf16 GEMMs would run through fp32 and gain no speed; "
            "bf16 would save memory only"};
  }
  return {PrecisionMode::fp32,
          "fp32: this CPU has no native bf16 dot products (no AVX512_BF16 or AMX-BF16), so bf16 "
          "GEMMs would be emulated through fp32 and gain no speed; fp16 would save memory only"};
}

PrecisionChoice choose_precision(const GpuInfo& gpu) {
  const std::string what = gpu.name + " (compute capability " + std::to_string(gpu.cc_major) +
                           "." + std::to_string(gpu.cc_minor) + ")";
  if (gpu.tensor_bf16) {
    return {PrecisionMode::bf16, "bf16: " + what +
                                     " has bf16 Tensor Cores; bf16 keeps fp32's range, so no loss "
                                     "scaling is needed"};
  }
  if (gpu.tensor_fp16) {
    return {PrecisionMode::fp16, "fp16: " + what +
                                     " has fp16 Tensor Cores but none for bf16; fp16's range needs "
                                     "the GradScaler, which fp16 runs with by default"};
  }
  return {PrecisionMode::fp32,
          "fp32: " + what + " has no Tensor Cores, so 16-bit GEMMs would gain no speed"};
}

std::string fp8_refusal(const GpuInfo& gpu) {
  if (gpu.tensor_fp8) return {};
  return gpu.name + " (compute capability " + std::to_string(gpu.cc_major) + "." +
         std::to_string(gpu.cc_minor) +
         ") has no fp8 Tensor Cores (sm_89 and newer: Ada, Hopper), so the fp8 recipes cannot "
         "run their GEMMs there; train in bf16 on it" +
         (gpu.tensor_bf16 ? std::string() : std::string(" (fp16 on this GPU)")) +
         ", or run the recipe on --device cpu, whose exact emulation computes the same products";
}

DType default_layer_compute(const CpuFeatures& cpu) {
  const bool native_bf16 = cpu.avx512_bf16 || cpu.amx_bf16 || cpu.arm_bf16;
  const bool native_fp16 = cpu.avx512_fp16 || cpu.arm_fp16;
  return native_fp16 && !native_bf16 ? DType::f16 : DType::bf16;
}

std::string precision_warnings(PrecisionMode mode, bool has_grad_scaler, const CpuFeatures& cpu) {
  std::string w;
  if (mode == PrecisionMode::fp16 && !has_grad_scaler) {
    w += "WARNING: fp16 without a GradScaler: gradients below 6e-8 underflow to zero and are "
         "lost silently; use a GradScaler (it is on by default for --precision fp16)\n";
  }
  if (mode == PrecisionMode::fp16 && !cpu.avx512_fp16) {
    w += "note: fp16 has no native arithmetic on this CPU (no AVX512_FP16): it is emulated as "
         "fp16 storage with fp32 accumulation, which saves memory but not time\n";
  }
  const bool bf16_mode = mode == PrecisionMode::bf16 || mode == PrecisionMode::pure_bf16 ||
                         mode == PrecisionMode::pure_bf16_sr;
  if (bf16_mode && cpu.arm_bf16) {
    w += "note: oneDNN 2.6 has no bf16 GEMM for arm64 that uses this CPU's bf16 instructions: "
         "bf16 GEMMs are computed through fp32, so expect memory savings but no speed-up\n";
  } else if (bf16_mode && !cpu.avx512_bf16 && !cpu.amx_bf16) {
    w += std::string("note: this CPU has no native bf16 dot products (") +
         (cpu.neon ? "no Arm BF16" : "no AVX512_BF16 or AMX-BF16") + "): bf16 "
         "GEMMs are computed through fp32, so expect memory savings but no speed-up\n";
  }
  return w;
}

}  // namespace mixprec::amp
