// `mixprec env`: what this machine offers for mixed precision (CPU, the features that matter,
// threads, oneDNN, mixprec's ISA, MPI support) and which precision to train in here, with the
// reasoning per format, following the seeds' format decision table.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "mixprec/amp/precision.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/runtime.h"
#include "mixprec/dist/world.h"

namespace mixprec::tools {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(colon + 1);
    const std::size_t first = name.find_first_not_of(" \t");
    return first == std::string::npos ? "unknown" : name.substr(first);
  }
  return "unknown (no 'model name' in /proc/cpuinfo)";
}

// The features that matter for mixed precision on the architecture this binary runs on.
std::vector<std::pair<const char*, bool>> feature_list(const CpuFeatures& f) {
#if defined(__aarch64__)
  return {{"BF16", f.arm_bf16}, {"FP16", f.arm_fp16}, {"NEON", f.neon}, {"SVE", f.sve},
          {"SVE2", f.sve2}};
#else
  return {{"AVX512_BF16", f.avx512_bf16},
          {"AMX-BF16", f.amx_bf16},
          {"AVX512_FP16", f.avx512_fp16},
          {"F16C", f.f16c},
          {"AVX2", f.avx2},
          {"AVX-512F", f.avx512f},
          {"FMA", f.fma}};
#endif
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
  cmd->add_flag("--json", *json, "Print JSON instead of text");
  cmd->callback([json] {
    const CpuFeatures& f = cpu_features();
    const amp::PrecisionChoice choice = amp::choose_precision(f);
    const std::vector<FormatAdvice> formats = advice(f);
    if (*json) {
      nlohmann::json out;
      out["cpu"] = cpu_model_name();
      out["features"] = nlohmann::json::object();
      for (const auto& [label, on] : feature_list(f)) out["features"][label] = on;
      out["threads"] = num_threads();
      out["onednn"] = onednn_description();
      out["max_isa"] = name(max_isa());
      out["simd_target"] = simd_target();
      out["backend"] = kernel_backend();
      out["mpi"] = {{"built_in", dist::mpi_built_in()}};
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
    std::printf("features: ");
    for (const auto& [label, on] : feature_list(f))
      std::printf(" %s %s", label, on ? "yes" : "no ");
    std::printf("\nthreads:   %d\n", num_threads());
    std::printf("oneDNN:    %s\n", onednn_description().c_str());
    std::printf("max_isa:   %s (cap with MIXPREC_ISA=scalar|sse4|avx2|avx512|avx512_bf16|neon|sve|sve2)\n",
                name(max_isa()));
    std::printf("simd:      %s (the Highway target mixprec's vector kernels run)\n", simd_target());
    std::printf("backend:   %s (MIXPREC_BACKEND=cpu|ref)\n", kernel_backend().c_str());
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
