#include "mixprec/runtime/runtime.h"

#include <omp.h>

#include <dnnl.hpp>
#include <sstream>

#include "core/cuda_runtime.h"
#include "kernels/backend.h"
#include "mixprec/core/device.h"
#include "mixprec/core/error.h"
#include "mixprec/core/gpu.h"

namespace mixprec {

void set_num_threads(int n) {
  MIXPREC_CHECK(n >= 1, ValueError, "set_num_threads", "the thread count must be >= 1, got " << n);
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

std::string onednn_description() {
  const dnnl_version_t* v = dnnl_version();
  std::ostringstream os;
  os << "oneDNN " << v->major << '.' << v->minor << '.' << v->patch;
#if defined(__x86_64__) || defined(__i386__)
  // The ISA oneDNN will use: the highest the CPU supports unless DNNL_MAX_CPU_ISA caps it.
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: os << " (isa avx512_core_amx)"; break;
    case dnnl::cpu_isa::avx512_core_bf16: os << " (isa avx512_core_bf16)"; break;
    case dnnl::cpu_isa::avx512_core_vnni: os << " (isa avx512_core_vnni)"; break;
    case dnnl::cpu_isa::avx512_core: os << " (isa avx512_core)"; break;
    case dnnl::cpu_isa::avx2: os << " (isa avx2)"; break;
    default: os << " (isa below avx2)"; break;
  }
#else
  // oneDNN's cpu_isa levels are x86 ones only (on other CPUs it reports "all"): name the
  // architecture instead of a misleading "below avx2".
#if defined(__aarch64__)
  os << " (aarch64)";
#endif
#endif
  return os.str();
}

std::string kernel_backend() { return kernels::backend().name; }

void set_device(const std::string& text) {
  const Device device = parse_device(text);
  switch (device.type) {
    case DeviceType::cpu:
      // The host backend MIXPREC_BACKEND chose (cpu, or ref), or cpu after a device backend.
      if (const std::string now = kernels::backend().name; now == "devsim" || now == "cuda") {
        kernels::set_backend("cpu");
      }
      return;
    case DeviceType::devsim:
      kernels::set_backend("devsim");
      return;
    case DeviceType::cuda:
      require_gpu(device.index);  // a build without CUDA, no driver, no GPU, no GPU N
      detail::cuda_set_device(device.index);
      kernels::set_backend("cuda");
      set_current_device(device);
      return;
  }
}

}  // namespace mixprec
