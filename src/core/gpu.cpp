// The GPU inventory. Only this file sees the CUDA runtime (MIXPREC_HAVE_CUDA, set by CMake when
// MIXPREC_CUDA is on): the runtime is linked statically and finds the driver (libcuda) at run
// time, so a machine without one loads mixprec and gets "no NVIDIA driver" here.
#include "mixprec/core/gpu.h"

#include <string>
#include <utility>

#include "core/cuda_runtime.h"
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

namespace detail {

#ifdef MIXPREC_HAVE_CUDA
namespace {

void check(cudaError_t err, const char* call, std::size_t bytes) {
  MIXPREC_CHECK(err == cudaSuccess, BackendError, call,
                cudaGetErrorName(err) << " (" << cudaGetErrorString(err) << ") moving or asking for "
                                      << bytes << " bytes");
}

void* cuda_allocate(std::size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // out of memory is not sticky: clear it, the caller decides
    return nullptr;
  }
  return p;
}
void cuda_release(void* p) { (void)cudaFree(p); }

}  // namespace

BlockCache& cuda_block_cache() {
  // Never destroyed: tensors in static objects may be freed after main returns.
  static BlockCache* cache =
      new BlockCache({&cuda_allocate, &cuda_release}, ~std::size_t{0});
  return *cache;
}
void cuda_set_device(int index) { check(cudaSetDevice(index), "cudaSetDevice", 0); }
namespace {
/// Never destroyed, like the block cache. Mapped pinned memory: kernels write the verdicts
/// straight into host memory (UVA: the host address is the device address too).
DeferredChecks& cuda_deferred_checks() {
  static DeferredChecks* checks = [] {
    void* slots = nullptr;
    const std::size_t bytes = DeferredChecks::kSlots * 2 * sizeof(std::int64_t);
    check(cudaHostAlloc(&slots, bytes, cudaHostAllocMapped), "cudaHostAlloc (check verdicts)",
          bytes);
    return new DeferredChecks(static_cast<std::int64_t*>(slots));
  }();
  return *checks;
}
}  // namespace

std::int64_t* cuda_defer_check(DeferredChecks::Raise raise) {
  DeferredChecks& checks = cuda_deferred_checks();
  if (std::int64_t* slot = checks.claim(raise)) return slot;
  cuda_synchronize();  // settles every pending check, freeing their slots
  std::int64_t* slot = checks.claim(std::move(raise));
  MIXPREC_ASSERT(slot != nullptr);
  return slot;
}
void cuda_download(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (download)", bytes);
  cuda_deferred_checks().settle();
}
void cuda_upload(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (upload)", bytes);
}
void cuda_device_copy(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy (device copy)", bytes);
}
void cuda_memset(void* dst, int value, std::size_t bytes) {
  check(cudaMemset(dst, value, bytes), "cudaMemset", bytes);
}
void cuda_synchronize() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", 0);
  cuda_deferred_checks().settle();
}
void* cuda_event_create() {
  cudaEvent_t event = nullptr;
  check(cudaEventCreate(&event), "cudaEventCreate", 0);
  return event;
}
void cuda_event_destroy(void* event) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
void cuda_event_record(void* event) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event), nullptr), "cudaEventRecord", 0);
}
void cuda_event_wait(void* event) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize", 0);
}
float cuda_event_elapsed_ms(void* from, void* to) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)),
        "cudaEventElapsedTime", 0);
  return ms;
}
#else
namespace {
[[noreturn]] void no_cuda(const char* call) {
  throw_error<BackendError>(call, gpu_inventory().why_none);
}
}  // namespace
BlockCache& cuda_block_cache() { no_cuda("cuda allocation"); }
void cuda_set_device(int) { no_cuda("cudaSetDevice"); }
void cuda_download(void*, const void*, std::size_t) { no_cuda("download"); }
void cuda_upload(void*, const void*, std::size_t) { no_cuda("upload"); }
void cuda_device_copy(void*, const void*, std::size_t) { no_cuda("device_copy"); }
void cuda_memset(void*, int, std::size_t) { no_cuda("device_memset"); }
void cuda_synchronize() { no_cuda("synchronize"); }
void* cuda_event_create() { no_cuda("cudaEventCreate"); }
void cuda_event_destroy(void*) {}
void cuda_event_record(void*) { no_cuda("cudaEventRecord"); }
void cuda_event_wait(void*) { no_cuda("cudaEventSynchronize"); }
float cuda_event_elapsed_ms(void*, void*) { no_cuda("cudaEventElapsedTime"); }
std::int64_t* cuda_defer_check(DeferredChecks::Raise) { no_cuda("deferred check"); }
#endif

}  // namespace detail
}  // namespace mixprec
