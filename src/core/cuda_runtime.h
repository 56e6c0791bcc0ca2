#pragma once
// The CUDA runtime calls the core makes (allocation, the four transfers, device selection), each
// checked: a failure throws BackendError naming the call, the bytes and the runtime's error. In a
// build without CUDA (no MIXPREC_HAVE_CUDA) each throws the inventory's "built without CUDA";
// --device refuses cuda before any of them could be reached. Defined in gpu.cpp, the one file
// that sees the runtime.
#include <cstddef>

#include "core/block_cache.h"

namespace mixprec::detail {

/// The caching allocator of cuda:0's memory (cudaMalloc/cudaFree behind a BlockCache; no limit:
/// a steady training loop stops calling cudaMalloc after its first step, and an out-of-memory
/// returns the cached blocks and tries again).
BlockCache& cuda_block_cache();
/// Makes GPU `index` the one the calls below use.
void cuda_set_device(int index);
/// Synchronous copies (download is the host's only synchronisation with the GPU).
void cuda_download(void* dst, const void* src, std::size_t bytes);
void cuda_upload(void* dst, const void* src, std::size_t bytes);
void cuda_device_copy(void* dst, const void* src, std::size_t bytes);
void cuda_memset(void* dst, int value, std::size_t bytes);
/// Waits for all work queued on the current GPU (cudaDeviceSynchronize).
void cuda_synchronize();

}  // namespace mixprec::detail
