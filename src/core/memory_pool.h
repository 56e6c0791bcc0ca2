#pragma once
// A private pool of device memory for a captured graph (core/device_graph.h), as PyTorch's
// graph_pool_handle: every Storage allocated while a capture is open on its thread comes from
// the capture's pool and returns to it when freed, never to the device's caching allocator. A
// graph bakes in the addresses its kernels were captured with; a replay writes them again, so
// none of them may be handed to another tensor while the graph lives, not even the blocks of
// temporaries the captured step freed (a later replay writes them again). Inside the capture a
// freed block may serve a later request of the same size: the graph replays in capture order,
// as the stream ran it. When the graph and every tensor of the pool are gone, the blocks go back
// to the device's allocator.
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mixprec/core/device.h"

namespace mixprec::detail {

class MemoryPool {
 public:
  explicit MemoryPool(Device device) : device_(device) {}
  /// Returns every block to the device's allocator (each Storage holds the pool, so none is
  /// in use any more).
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  /// A block of at least `bytes`: a free block of the pool of the same rounded size, else a new
  /// one from the device's allocator (BackendError naming the device when it is out of memory).
  void* acquire(std::size_t bytes);
  /// Returns a block acquired with the same `bytes`, kept for this pool alone.
  void release(void* block, std::size_t bytes);
  Device device() const { return device_; }
  /// Bytes the pool holds, in use or free.
  std::size_t reserved_bytes() const;

 private:
  Device device_;
  mutable std::mutex mu_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // rounded size -> free blocks
  std::vector<std::pair<void*, std::size_t>> owned_;          // every block, rounded size
};

}  // namespace mixprec::detail
