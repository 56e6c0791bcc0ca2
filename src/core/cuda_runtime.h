#pragma once
// The CUDA runtime calls the core makes (allocation, the four transfers, device selection), each
// checked: a failure throws BackendError naming the call, the bytes and the runtime's error. In a
// build without CUDA (no MIXPREC_HAVE_CUDA) each throws the inventory's "built without CUDA";
// --device refuses cuda before any of them could be reached. Defined in gpu.cpp, the one file
// that sees the runtime.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/block_cache.h"
#include "core/deferred_checks.h"

namespace mixprec::detail {

/// The caching allocator of cuda:0's memory (cudaMalloc/cudaFree behind a BlockCache; no limit:
/// a steady training loop stops calling cudaMalloc after its first step, and an out-of-memory
/// returns the cached blocks and tries again).
BlockCache& cuda_block_cache();
/// Scratch memory for one call on the current GPU, given back when the call ends (the stream
/// orders later users after its kernels): from the capture's private pool while this thread
/// captures a graph (core/device_graph.h: every replay writes it again, so no other tensor may
/// get it while the graph lives), else from the block cache. `pool` is set to the pool it came
/// from (null: the cache); hand it to cuda_scratch_release with the block. Null when out of
/// memory.
void* cuda_scratch_acquire(std::size_t bytes, std::shared_ptr<void>& pool);
void cuda_scratch_release(void* block, std::size_t bytes, const std::shared_ptr<void>& pool);
/// Makes GPU `index` the one the calls below use.
void cuda_set_device(int index);
/// The backend's stream on the current GPU (a cudaStream_t, opaque here): every kernel, library
/// call (cuBLASLt, cuDNN), transfer and profiler event runs on it; the cuda kernels' stream()
/// returns it, so core and kernels cannot disagree. One per GPU, created on first use as a
/// blocking stream (it still orders with the legacy default stream, so a call that missed it
/// stays ordered), shared by every host thread: the runtime serialises their calls, and work runs
/// in the order the host queued it, which is all the library assumes (gpu.cpp).
void* cuda_stream();
/// Transfers, queued on the backend's stream. download and upload return once the copy is done
/// (download is the host's only read of the GPU; the host buffer may be reused or freed
/// at once); device copy and memset return at once. download and synchronize settle the
/// deferred checks once the stream has caught up.
void cuda_download(void* dst, const void* src, std::size_t bytes);
void cuda_upload(void* dst, const void* src, std::size_t bytes);
void cuda_device_copy(void* dst, const void* src, std::size_t bytes);
void cuda_memset(void* dst, int value, std::size_t bytes);
/// Waits for all work queued on the backend's stream (cudaStreamSynchronize), raising the
/// asynchronous errors of that work as cudaDeviceSynchronize did.
void cuda_synchronize();
/// CUDA-graph capture of the backend's stream (core/device_graph.h; the capture probe):
/// begin opens a capture (cudaStreamBeginCapture) in global mode (the probe: any thread's
/// unsafe call breaks it, so it finds them all) or thread-local mode (a training step's graph:
/// only the capturing thread is held to the rules, so the data loader's thread may allocate
/// meanwhile; its transfers wait, core/device_graph.h; the block cache's cudaMalloc then runs
/// in relaxed mode, its block kept by the capture's pool); status says whether it is still
/// valid; end closes it whatever happened (a failed capture must be ended too), counts the
/// graph's nodes, clears the runtime's last error and, given `exec`, instantiates the graph
/// there (cudaGraphExec_t; null when it fails, the reason in `error`); without, the graph is
/// destroyed unrun.
enum class CaptureStatus { none, active, invalidated };
struct CaptureEnd {
  bool captured = false;       ///< the capture ended with a graph (and, asked, an instance)
  std::size_t nodes = 0;       ///< cudaGraphGetNodes of that graph
  std::string error;           ///< why not: the call and its CUDA error name
  std::string first_failure;   ///< the first runtime call of gpu.cpp that failed inside it
  /// The deferred checks' slots the captured kernels write (claimed for good: each replay
  /// writes them again); give them to cuda_graph_destroy. Empty without an instance.
  std::vector<std::int64_t*> check_slots;
};
void cuda_capture_begin(bool thread_local_mode = false);
CaptureStatus cuda_capture_status();
CaptureEnd cuda_capture_end(void** exec = nullptr);
/// Queues an instantiated graph on the backend's stream.
void cuda_graph_launch(void* exec);
/// Destroys an instance and frees its deferred-check slots.
void cuda_graph_destroy(void* exec, const std::vector<std::int64_t*>& check_slots);
/// Timing events (cudaEvent_t, opaque here): created with timing on, recorded on the backend's
/// stream, and read after cuda_event_wait. The profiler's DeviceClock uses them, so a
/// profiled op is timed in the GPU's queue instead of by synchronising around it.
void* cuda_event_create();
void cuda_event_destroy(void* event);
void cuda_event_record(void* event);
/// Waits until the GPU has passed `event`.
void cuda_event_wait(void* event);
/// Milliseconds from `from` to `to`, both recorded and passed (about 0.5 us resolution).
float cuda_event_elapsed_ms(void* from, void* to);
/// A deferred check's slot (core/deferred_checks.h) in mapped pinned memory, as the address a
/// kernel writes; when every slot is pending, synchronises (settling them) first.
std::int64_t* cuda_defer_check(DeferredChecks::Raise raise);

}  // namespace mixprec::detail
