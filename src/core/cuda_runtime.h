#pragma once
// The CUDA runtime calls the core makes (allocation, the four transfers, device selection), each
// checked: a failure throws BackendError naming the call, the bytes and the runtime's error. In a
// build without CUDA (no MIXPREC_HAVE_CUDA) each throws the inventory's "built without CUDA";
// --device refuses cuda before any of them could be reached. Defined in gpu.cpp, the one file
// that sees the runtime.
#include <cstddef>
#include <cstdint>

#include "core/block_cache.h"
#include "core/deferred_checks.h"

namespace mixprec::detail {

/// The caching allocator of cuda:0's memory (cudaMalloc/cudaFree behind a BlockCache; no limit:
/// a steady training loop stops calling cudaMalloc after its first step, and an out-of-memory
/// returns the cached blocks and tries again).
BlockCache& cuda_block_cache();
/// Makes GPU `index` the one the calls below use.
void cuda_set_device(int index);
/// Synchronous copies (download is the host's only synchronisation with the GPU). download and
/// synchronize settle the deferred checks once the GPU has caught up.
void cuda_download(void* dst, const void* src, std::size_t bytes);
void cuda_upload(void* dst, const void* src, std::size_t bytes);
void cuda_device_copy(void* dst, const void* src, std::size_t bytes);
void cuda_memset(void* dst, int value, std::size_t bytes);
/// Waits for all work queued on the current GPU (cudaDeviceSynchronize).
void cuda_synchronize();
/// Timing events (cudaEvent_t, opaque here): created with timing on, recorded on the legacy
/// default stream (which orders after the work of every blocking stream, the backend's
/// included), and read after cuda_event_wait. The profiler's DeviceClock uses them, so a
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
