// `mixprec env`: what this machine offers for mixed precision (CPU, the features that matter,
// threads, oneDNN, mixprec's ISA, MPI support) and which precision to train in here, with the
// reasoning per format, following the seeds' format decision table.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/cpu_class.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/cpu_model.h"
#include "mixprec/core/gpu.h"
#include "mixprec/kernels/cudnn.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/dist/world.h"

namespace mixprec::tools {
namespace {

// The features that matter for mixed precision on the architecture of the CPU the decisions
// see (an arm64 profile on x86-64 lists arm64 features).
std::vector<std::pair<const char*, bool>> feature_list(const CpuFeatures& f) {
  if (classify_cpu(f).arch == CpuArch::arm64) {
    return {{"BF16", f.arm_bf16}, {"FP16", f.arm_fp16}, {"NEON", f.neon}, {"SVE", f.sve},
            {"SVE2", f.sve2}};
  }
  return {{"AVX512_BF16", f.avx512_bf16},
          {"AMX-BF16", f.amx_bf16},
          {"AVX512_FP16", f.avx512_fp16},
          {"F16C", f.f16c},
          {"AVX2", f.avx2},
          {"AVX-512F", f.avx512f},
          {"FMA", f.fma}};
}

std::string level_list(const CpuClass& c) {
  std::string s;
  for (const CpuClassLevel& l : c.levels) {
    if (!s.empty()) s += ' ';
    s += std::string(name(l.level)) + ":" + l.target;
  }
  return s;
}

// `mixprec env --classes`: the table of CPU classes, what mixprec decides on each.
/// "tf32 bf16 fp16 fp8": the tensor-core input types of a GPU.
std::string tensor_types(const GpuInfo& g) {
  std::string s;
  for (const auto& [label, on] : {std::pair{"tf32", g.tensor_tf32}, std::pair{"bf16", g.tensor_bf16},
                                  std::pair{"fp16", g.tensor_fp16}, std::pair{"fp8", g.tensor_fp8}}) {
    if (on) s.append(s.empty() ? "" : " ").append(label);
  }
  return s.empty() ? "none" : s;
}

nlohmann::json gpus_json() {
  const GpuInventory& inv = gpu_inventory();
  nlohmann::json out{{"built_with_cuda", inv.built_with_cuda}, {"gpus", nlohmann::json::array()}};
  for (const GpuInfo& g : inv.gpus) {
    out["gpus"].push_back({{"index", g.index}, {"name", g.name},
                           {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
                           {"sms", g.sm_count}, {"memory_bytes", g.memory_bytes},
                           {"tensor_core_types", tensor_types(g)}});
  }
  if (!inv.why_none.empty()) out["why_none"] = inv.why_none;
  const CudnnInfo cudnn = cudnn_info();
  nlohmann::json c{{"built_with_cudnn", cudnn.built_with_cudnn}};
  if (!cudnn.required.empty()) c["required"] = cudnn.required;
  if (cudnn.why_none.empty()) {
    c["version"] = cudnn.version;
    c["path"] = cudnn.path;
  } else {
    c["why_none"] = cudnn.why_none;
  }
  out["cudnn"] = c;
  return out;
}

/// The cuDNN library the cuda backend loaded (docs/cuda.md "How cuDNN is found"), or why none.
void print_cudnn() {
  const CudnnInfo c = cudnn_info();
  if (c.why_none.empty()) {
    std::printf("cudnn:     %s at %s\n", c.version.c_str(), c.path.c_str());
  } else {
    std::printf("cudnn:     none: %s\n", c.why_none.c_str());
  }
}

void print_gpus() {
  const GpuInventory& inv = gpu_inventory();
  if (inv.gpus.empty()) {
    std::printf("gpus:      none: %s\n", inv.why_none.c_str());
    print_cudnn();
    return;
  }
  for (const GpuInfo& g : inv.gpus) {
    std::printf("gpu:       cuda:%d %s, compute capability %d.%d, %d SMs, %.1f GiB, tensor cores: %s\n",
                g.index, g.name.c_str(), g.cc_major, g.cc_minor, g.sm_count,
                static_cast<double>(g.memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                tensor_types(g).c_str());
  }
  print_cudnn();
}

void print_classes(bool json) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CpuClass& c : cpu_classes()) {
    if (json) {
      // An array, lowest level first: a JSON object's keys would come back sorted by name.
      nlohmann::json levels = nlohmann::json::array();
      for (const CpuClassLevel& l : c.levels) levels.push_back({{"level", name(l.level)}, {"target", l.target}});
      rows.push_back({{"name", c.name},
                      {"summary", c.summary},
                      {"arch", c.arch == CpuArch::arm64 ? "arm64" : "x86_64"},
                      {"features", c.features.to_string()},
                      {"levels", levels},
                      {"onednn", c.onednn_isa},
                      {"auto", c.auto_precision},
                      {"auto_layer_compute", name(c.layer_compute)},
                      {"bf16_gemm", c.bf16_gemm_native ? "native" : "widened to f32"}});
      continue;
    }
    std::printf("%s: %s\n  features:   %s\n  levels:     %s\n  oneDNN:     %s\n"
                "  auto:       %s; auto-layer starts in %s; bf16 GEMMs %s\n",
                c.name, c.summary, c.features.to_string().c_str(), level_list(c).c_str(),
                c.onednn_isa, c.auto_precision, name(c.layer_compute),
                c.bf16_gemm_native ? "native" : "widened to f32");
  }
  if (json) std::puts(rows.dump(2).c_str());
  else std::printf("\nMIXPREC_CPU_PROFILE=NAME makes mixprec decide as on class NAME (tests "
                   "use it); what executes stays what this CPU has.\n");
}

// The seeds' decision table, mapped from GPUs to CPUs: native bf16 dot products play the role
// of Ampere+ bf16 Tensor Cores ("BF16 autocast, no GradScaler"); without them we are in the
// "CPU-only training: stay FP32" row, since there is nothing fast to gain and AMP adds risk.
struct FormatAdvice {
  const char* format;
  std::string reason;
};

std::vector<FormatAdvice> advice(const CpuFeatures& f) {
  const bool native_bf16 = f.avx512_bf16 || f.amx_bf16;
  std::vector<FormatAdvice> out;
  const char* fp32_isa = f.avx512f && f.fma ? "AVX-512F with FMA"
                         : f.avx2 && f.fma  ? "AVX2 with FMA"
                         : f.sve            ? "SVE with FMA"
                         : f.neon           ? "NEON with FMA"
                                            : "scalar";
  out.push_back({"fp32", std::string("fp32: native vector arithmetic (") + fp32_isa +
                             "); the baseline every other precision is checked against" +
                             (native_bf16 ? ""
                                          : "; the seeds' table says CPU-only training stays "
                                            "in fp32 when there is no native 16-bit math")});
  if (native_bf16) {
    std::string units = f.avx512_bf16 ? "AVX512_BF16" : "";
    if (f.amx_bf16) units += units.empty() ? "AMX-BF16" : " and AMX-BF16";
    out.push_back({"bf16", "bf16: native bf16 dot products (" + units +
                               "): GEMMs run in bf16 with fp32 accumulation, about 2x fp32; fp32's "
                               "exponent range, so no loss scaling (the seeds' 'BF16 autocast, no "
                               "GradScaler' row)"});
  } else if (f.arm_bf16) {
    // mixprec takes the bf16 GEMM path only for AVX512_BF16/AMX (see kernels/matmul.h).
    out.push_back({"bf16",
                   "bf16: the CPU has bf16 dot products (Arm BF16), but mixprec's GEMMs do not "
                   "use them: GEMMs run in fp32 after widening; memory savings only"});
  } else {
    out.push_back({"bf16",
                   "bf16: no native bf16 dot products here (no AVX512_BF16/AMX): GEMMs run "
                   "in fp32 after widening; memory savings only"});
  }
  const char* fp16_unit = f.avx512_fp16 ? "AVX512_FP16" : f.arm_fp16 ? "Arm FP16" : nullptr;
  std::string fp16 =
      fp16_unit != nullptr
          ? std::string("fp16: the CPU has native fp16 arithmetic (") + fp16_unit +
                "), but mixprec has no kernels using it: f16 storage with fp32 compute; needs "
                "loss scaling (range 6e-8..65504)"
          : std::string("fp16: no native fp16 arithmetic (no AVX512_FP16): f16 storage with fp32 "
                        "compute; needs loss scaling (range 6e-8..65504)");
  // NEON converts f16<->f32 in hardware (FCVTL/FCVTN) on every arm64 CPU.
  fp16 += f.f16c   ? "; F16C converts f16<->f32 in hardware"
          : f.neon ? "; NEON converts f16<->f32 in hardware"
                   : "; no F16C: conversions are scalar";
  out.push_back({"fp16", fp16});
  return out;
}

}  // namespace

void add_env_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "env",
      "Describe this machine for mixed precision: CPU features, threads, oneDNN, and the "
      "recommended precision with the reasoning per format");
  auto json = std::make_shared<bool>(false);
  auto classes = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON instead of text");
  cmd->add_flag("--classes", *classes,
                "List the table of CPU classes (the MIXPREC_CPU_PROFILE names) and what mixprec "
                "decides on each: SIMD levels and their Highway targets, oneDNN, auto precision");
  cmd->callback([json, classes] {
    if (*classes) {
      print_classes(*json);
      return;
    }
    const CpuFeatures& f = cpu_features();
    const CpuClass& reported = reported_cpu_class();
    const CpuClass& hardware = hardware_cpu_class();
    const amp::PrecisionChoice choice = amp::choose_precision(f);
    const std::vector<FormatAdvice> formats = advice(f);
    if (*json) {
      nlohmann::json out;
      out["cpu"] = cpu_model_name();
      out["features"] = nlohmann::json::object();
      for (const auto& [label, on] : feature_list(f)) out["features"][label] = on;
      out["threads"] = num_threads();
      out["onednn"] = onednn_description();
      out["cpu_class"] = reported.name;
      out["hardware_class"] = hardware.name;
      if (!cpu_profile().empty()) out["cpu_profile"] = cpu_profile();
      const std::string pw = cpu_profile_warning();
      if (!pw.empty()) out["profile_warning"] = pw;
      out["max_isa"] = name(max_isa());
      out["executed_isa"] = name(executed_isa());
      out["simd_target"] = simd_target();
      out["backend"] = kernel_backend();
      out["mpi"] = {{"built_in", dist::mpi_built_in()}};
      out["cuda"] = gpus_json();
      if (dist::mpi_built_in()) out["mpi"]["library"] = dist::mpi_library_version();
      const std::string w = isa_env_warning();
      if (!w.empty()) out["isa_warning"] = w;
      out["recommended"] = {{"precision", amp::name(choice.mode)}, {"reason", choice.reason}};
      out["formats"] = nlohmann::json::object();
      for (const FormatAdvice& a : formats) out["formats"][a.format] = a.reason;
      std::puts(out.dump(2).c_str());
      return;
    }
    std::printf("cpu:       %s\n", cpu_model_name().c_str());
    if (cpu_profile().empty()) {
      std::printf("class:     %s (%s; `mixprec env --classes` lists them)\n", reported.name,
                  reported.summary);
    } else {
      std::printf("profile:   %s (MIXPREC_CPU_PROFILE: decisions as on %s; this CPU is %s and "
                  "executes up to %s)\n",
                  reported.name, reported.summary, hardware.name, name(hardware_isa()));
    }
    std::printf("features: ");
    for (const auto& [label, on] : feature_list(f))
      std::printf(" %s %s", label, on ? "yes" : "no ");
    std::printf("\nthreads:   %d\n", num_threads());
    std::printf("oneDNN:    %s\n", onednn_description().c_str());
    std::printf("max_isa:   %s (cap with MIXPREC_ISA=scalar|sse4|avx2|avx512|avx512_bf16|neon|sve|sve2)\n",
                name(max_isa()));
    std::printf("simd:      %s (the Highway target mixprec's vector kernels run)\n", simd_target());
    if (executed_isa() != max_isa())
      std::printf("executed:  %s (the level this CPU really runs for max_isa %s)\n",
                  name(executed_isa()), name(max_isa()));
    std::printf("backend:   %s (MIXPREC_BACKEND=cpu|ref)\n", kernel_backend().c_str());
    print_gpus();
    if (dist::mpi_built_in())
      std::printf("mpi:       built in (%s); run N ranks with mpirun -np N\n",
                  dist::mpi_library_version().c_str());
    else
      std::printf("mpi:       not built in (configure with -DMIXPREC_MPI=ON; needs libopenmpi-dev)\n");
    std::printf("\nrecommended precision: %s\n  %s\n\nper format:\n", amp::name(choice.mode),
                choice.reason.c_str());
    for (const FormatAdvice& a : formats) std::printf("  %s\n", a.reason.c_str());
  });
}

}  // namespace mixprec::tools
