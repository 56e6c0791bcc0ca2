// The GPU inventory. Only this file sees the CUDA runtime (MIXPREC_HAVE_CUDA, set by CMake when
// MIXPREC_CUDA is on): the runtime is linked statically and finds the driver (libcuda) at run
// time, so a machine without one loads mixprec and gets "no NVIDIA driver" here.
#include "mixprec/core/gpu.h"

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_runtime.h"
#include "mixprec/core/device.h"
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

// The first runtime call that failed while a capture was open (cuda_capture_begin to
// cuda_capture_end), for the capture probe: a failure the caller swallows (cuda_allocate's
// cudaMalloc, which the block cache takes for out of memory) is named here.
std::atomic<bool> g_capturing{false};
std::mutex g_capture_mu;
std::string g_capture_failure;
std::vector<std::int64_t*> g_capture_slots;  // deferred-check slots the open capture claimed
std::atomic<bool> g_capture_relaxed_malloc{false};  // the open capture's allocations go to a pool it keeps

void note_capture_failure(const char* call, cudaError_t err) {
  if (!g_capturing.load(std::memory_order_relaxed)) return;
  const std::lock_guard<std::mutex> lock(g_capture_mu);
  if (g_capture_failure.empty()) {
    g_capture_failure = std::string(call) + ": " + cudaGetErrorName(err);
  }
}

void check(cudaError_t err, const char* call, std::size_t bytes) {
  if (err != cudaSuccess) note_capture_failure(call, err);
  MIXPREC_CHECK(err == cudaSuccess, BackendError, call,
                cudaGetErrorName(err) << " (" << cudaGetErrorString(err) << ") moving or asking for "
                                      << bytes << " bytes");
}

void* cuda_allocate(std::size_t bytes) {
  void* p = nullptr;
  // Inside a capture, cudaMalloc is one of the "potentially unsafe" calls the capture mode
  // prohibits on this thread: it is not captured, so a graph that needed it to happen again at
  // every replay would be wrong. Ours does not: the block goes to the capture's private pool
  // (core/memory_pool.h), which keeps it for the graph's whole life. So this one call runs in
  // relaxed mode (cudaThreadExchangeStreamCaptureMode, push and pop, as its documentation
  // suggests); the probe, whose capture is never replayed, keeps the strict mode to show it.
  const bool relax = g_capturing.load(std::memory_order_relaxed) &&
                     g_capture_relaxed_malloc.load(std::memory_order_relaxed);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (relax) (void)cudaThreadExchangeStreamCaptureMode(&mode);
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (relax) (void)cudaThreadExchangeStreamCaptureMode(&mode);
  if (err != cudaSuccess) {
    note_capture_failure("cudaMalloc", err);
    (void)cudaGetLastError();  // out of memory is not sticky: clear it, the caller decides
    return nullptr;
  }
  return p;
}
void cuda_release(void* p) {
  if (const cudaError_t err = cudaFree(p); err != cudaSuccess) note_capture_failure("cudaFree", err);
}

}  // namespace

BlockCache& cuda_block_cache() {
  // Never destroyed: tensors in static objects may be freed after main returns.
  // Reuse needs no event or stream bookkeeping: every kernel, copy and library call that can
  // touch a block runs on the one backend stream, so work queued after the block was released
  // (by whichever thread) runs after the work that used it. PyTorch's caching allocator records
  // events only for blocks used on a second stream; we have none. cudaFree (trimming, or
  // out-of-memory retries) synchronises the device itself.
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
  if (g_capturing.load(std::memory_order_relaxed)) {
    // Inside a capture the kernel is replayed again and again: its slot stays claimed for the
    // graph, raised at every settle, and freed with the graph (cuda_release_check). No
    // synchronise to free slots here: that would break the capture.
    std::int64_t* slot = checks.claim_persistent(std::move(raise));
    MIXPREC_CHECK(slot != nullptr, BackendError, "cuda graph capture",
                  "more than " << DeferredChecks::kSlots << " device-side checks pending while "
                  "capturing; capture a shorter region");
    const std::lock_guard<std::mutex> lock(g_capture_mu);
    g_capture_slots.push_back(slot);
    return slot;
  }
  if (std::int64_t* slot = checks.claim(raise)) return slot;
  cuda_synchronize();  // settles every pending check, freeing their slots
  std::int64_t* slot = checks.claim(std::move(raise));
  MIXPREC_ASSERT(slot != nullptr);
  return slot;
}
namespace {

// One stream per GPU, created on first use (index: mixprec's current device, process-wide, not
// the calling thread's runtime device: the data loader's thread never calls cudaSetDevice).
// Deliberately a blocking stream (cudaStreamDefault, not cudaStreamNonBlocking): it still
// synchronises with the legacy default stream, so a runtime or library call we missed that runs
// on the legacy stream stays ordered with ours instead of racing it. Never destroyed, like the
// block cache: work may be queued while static objects are torn down.
constexpr int kMaxGpus = 64;
std::atomic<cudaStream_t> g_streams[kMaxGpus] = {};
std::mutex g_streams_mu;

int stream_device() {
  const Device d = current_device();
  return d.type == DeviceType::cuda ? d.index : 0;
}

cudaStream_t backend_stream_of(int device) {
  MIXPREC_CHECK(device >= 0 && device < kMaxGpus, BackendError, "cuda stream",
                "GPU " << device << " is beyond the " << kMaxGpus << " GPUs mixprec keeps streams for");
  std::atomic<cudaStream_t>& slot = g_streams[device];
  if (cudaStream_t s = slot.load(std::memory_order_acquire)) return s;
  const std::lock_guard<std::mutex> lock(g_streams_mu);
  if (cudaStream_t s = slot.load(std::memory_order_acquire)) return s;
  // Created on `device` whatever this thread's current runtime device is, which is restored.
  int before = 0;
  check(cudaGetDevice(&before), "cudaGetDevice", 0);
  if (before != device) check(cudaSetDevice(device), "cudaSetDevice", 0);
  cudaStream_t s = nullptr;
  const cudaError_t err = cudaStreamCreateWithFlags(&s, cudaStreamDefault);
  if (before != device) (void)cudaSetDevice(before);
  check(err, "cudaStreamCreateWithFlags", 0);
  slot.store(s, std::memory_order_release);
  return s;
}

cudaStream_t stream() { return backend_stream_of(stream_device()); }

}  // namespace

void* cuda_stream() { return stream(); }

// Transfers run on the backend's stream, so each orders after every kernel queued before it
// (whichever host thread queued it) without waiting for the whole device. download and upload
// then wait for the stream: the host memory is pageable (the runtime stages it anyway) and the
// caller may read or free it as soon as the call returns.
void cuda_download(void* dst, const void* src, std::size_t bytes) {
  const cudaStream_t s = stream();
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (download)",
        bytes);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize (download)", bytes);
  cuda_deferred_checks().settle();
}
void cuda_upload(void* dst, const void* src, std::size_t bytes) {
  const cudaStream_t s = stream();
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (upload)",
        bytes);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize (upload)", bytes);
}
void cuda_device_copy(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()),
        "cudaMemcpyAsync (device copy)", bytes);
}
void cuda_memset(void* dst, int value, std::size_t bytes) {
  check(cudaMemsetAsync(dst, value, bytes, stream()), "cudaMemsetAsync", bytes);
}
void cuda_synchronize() {
  // Returns, as cudaDeviceSynchronize did, the asynchronous errors of the kernels it waits for.
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize", 0);
  cuda_deferred_checks().settle();
}
void cuda_capture_begin(bool thread_local_mode) {
  {
    const std::lock_guard<std::mutex> lock(g_capture_mu);
    g_capture_failure.clear();
    g_capture_slots.clear();
    g_capture_relaxed_malloc.store(thread_local_mode);  // a training step's graph (with its pool)
  }
  check(cudaStreamBeginCapture(stream(), thread_local_mode ? cudaStreamCaptureModeThreadLocal
                                                          : cudaStreamCaptureModeGlobal),
        "cudaStreamBeginCapture", 0);
  g_capturing.store(true, std::memory_order_relaxed);
}
CaptureStatus cuda_capture_status() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream(), &status) != cudaSuccess) return CaptureStatus::invalidated;
  switch (status) {
    case cudaStreamCaptureStatusActive: return CaptureStatus::active;
    case cudaStreamCaptureStatusInvalidated: return CaptureStatus::invalidated;
    default: return CaptureStatus::none;
  }
}
CaptureEnd cuda_capture_end(void** exec) {
  CaptureEnd out;
  cudaGraph_t graph = nullptr;
  // Ends the capture whatever happened inside it (an invalidated capture must still be ended
  // before the stream takes work again).
  const cudaError_t err = cudaStreamEndCapture(stream(), &graph);
  g_capturing.store(false, std::memory_order_relaxed);
  if (err == cudaSuccess && graph != nullptr) {
    std::size_t nodes = 0;
    const cudaError_t count = cudaGraphGetNodes(graph, nullptr, &nodes);
    out.captured = count == cudaSuccess;
    out.nodes = nodes;
    if (!out.captured) out.error = std::string("cudaGraphGetNodes: ") + cudaGetErrorName(count);
  } else {
    out.error = std::string("cudaStreamEndCapture: ") + cudaGetErrorName(err);
  }
  if (exec != nullptr) *exec = nullptr;
  if (out.captured && exec != nullptr) {
    cudaGraphExec_t instance = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&instance, graph, 0);
    if (made == cudaSuccess) {
      *exec = instance;
    } else {
      out.captured = false;
      out.error = std::string("cudaGraphInstantiate: ") + cudaGetErrorName(made);
    }
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);  // the instance keeps what it needs
  {
    const std::lock_guard<std::mutex> lock(g_capture_mu);
    out.check_slots.swap(g_capture_slots);
  }
  if (exec == nullptr || *exec == nullptr) {
    // Nothing will replay the kernels that write these slots.
    for (std::int64_t* slot : out.check_slots) cuda_deferred_checks().release_persistent(slot);
    out.check_slots.clear();
  }
  // Capture errors are not sticky, but one may still be the runtime's last error: clear it so
  // that the next check_launch does not report it against an innocent kernel.
  const cudaError_t last = cudaGetLastError();
  if (last != cudaSuccess && out.error.empty()) {
    out.error = std::string("cudaGetLastError: ") + cudaGetErrorName(last);
  }
  {
    const std::lock_guard<std::mutex> lock(g_capture_mu);
    out.first_failure = g_capture_failure;
  }
  return out;
}
void cuda_graph_launch(void* exec) {
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), stream()), "cudaGraphLaunch", 0);
}
void cuda_graph_destroy(void* exec, const std::vector<std::int64_t*>& check_slots) {
  if (exec != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
  for (std::int64_t* slot : check_slots) cuda_deferred_checks().release_persistent(slot);
}
void* cuda_event_create() {
  cudaEvent_t event = nullptr;
  check(cudaEventCreate(&event), "cudaEventCreate", 0);
  return event;
}
void cuda_event_destroy(void* event) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
void cuda_event_record(void* event) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event), stream()), "cudaEventRecord", 0);
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
void* cuda_stream() { no_cuda("cuda stream"); }
void cuda_capture_begin(bool) { no_cuda("cudaStreamBeginCapture"); }
CaptureStatus cuda_capture_status() { return CaptureStatus::none; }
CaptureEnd cuda_capture_end(void**) { no_cuda("cudaStreamEndCapture"); }
void cuda_graph_launch(void*) { no_cuda("cudaGraphLaunch"); }
void cuda_graph_destroy(void*, const std::vector<std::int64_t*>&) {}
void* cuda_event_create() { no_cuda("cudaEventCreate"); }
void cuda_event_destroy(void*) {}
void cuda_event_record(void*) { no_cuda("cudaEventRecord"); }
void cuda_event_wait(void*) { no_cuda("cudaEventSynchronize"); }
float cuda_event_elapsed_ms(void*, void*) { no_cuda("cudaEventElapsedTime"); }
std::int64_t* cuda_defer_check(DeferredChecks::Raise) { no_cuda("deferred check"); }
#endif

}  // namespace detail
}  // namespace mixprec
