// The GPU inventory. Only this file sees the CUDA runtime (MIXPREC_HAVE_CUDA, set by CMake when
// MIXPREC_CUDA is on): the runtime is linked statically and finds the driver (libcuda) at run
// time, so a machine without one loads mixprec and gets "no NVIDIA driver" here.
#include "mixprec/core/gpu.h"

#include <string>

#include "mixprec/core/error.h"

#ifdef MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mixprec {
namespace {

GpuInventory query() {
  GpuInventory inv;
#ifndef MIXPREC_HAVE_CUDA
  inv.why_none = "this mixprec was built without CUDA (configure with -DMIXPREC_CUDA=ON where "
                 "the CUDA toolkit is installed)";
#else
  inv.built_with_cuda = true;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorInsufficientDriver) {
    inv.why_none = std::string("no NVIDIA driver: the CUDA runtime says ") +
                   cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  } else if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    inv.why_none = "no NVIDIA GPU: the driver is loaded but reports no CUDA device";
  } else if (err != cudaSuccess) {
    inv.why_none = std::string("the CUDA runtime cannot list GPUs: ") + cudaGetErrorName(err) +
                   " (" + cudaGetErrorString(err) + ")";
  }
  for (int i = 0; err == cudaSuccess && i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuInfo g = tensor_core_types(p.major, p.minor);
    g.index = i;
    g.name = p.name;
    g.sm_count = p.multiProcessorCount;
    g.memory_bytes = p.totalGlobalMem;
    inv.gpus.push_back(g);
  }
  if (inv.gpus.empty() && inv.why_none.empty()) {
    inv.why_none = "the CUDA runtime lists GPUs but reads the properties of none of them";
  }
#endif
  return inv;
}

}  // namespace

const GpuInventory& gpu_inventory() {
  static const GpuInventory inv = query();
  return inv;
}

GpuInfo tensor_core_types(int cc_major, int cc_minor) {
  GpuInfo g;
  g.cc_major = cc_major;
  g.cc_minor = cc_minor;
  const int cc = cc_major * 10 + cc_minor;
  g.tensor_fp16 = cc >= 70;
  g.tensor_tf32 = cc >= 80;
  g.tensor_bf16 = cc >= 80;
  g.tensor_fp8 = cc >= 89;
  return g;
}

void require_gpu(int index) {
  const GpuInventory& inv = gpu_inventory();
  MIXPREC_CHECK(!inv.gpus.empty(), BackendError, "cuda", inv.why_none);
  MIXPREC_CHECK(index >= 0 && index < static_cast<int>(inv.gpus.size()), BackendError, "cuda",
                "no GPU " << index << ": this machine has " << inv.gpus.size()
                          << (inv.gpus.size() == 1 ? " GPU (cuda:0)" : " GPUs (cuda:0 to cuda:")
                          << (inv.gpus.size() == 1 ? "" : std::to_string(inv.gpus.size() - 1) + ")"));
}

}  // namespace mixprec
