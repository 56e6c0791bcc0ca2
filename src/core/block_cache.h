#pragma once
// The caching allocator behind Storage: freed blocks are kept by size and handed back to the next
// request of the same rounded size, so a training loop, whose steps allocate the same sizes in
// the same order, stops calling the system allocator (and stops re-faulting fresh pages, which
// for multi-megabyte blocks that glibc returns to the kernel costs more than the kernels that
// fill them) after its first step.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace mixprec::detail {

/// Where a cache gets and returns the memory it does not have: the host's aligned_alloc/free,
/// or a device's (cudaMalloc/cudaFree). allocate returns nullptr when out of memory.
struct SystemAllocator {
  void* (*allocate)(std::size_t bytes);
  void (*free)(void* block);
};

class BlockCache {
 public:
  /// The process-wide cache of host memory (what cpu and devsim Storage use).
  static BlockCache& instance();

  /// A cache over `system`, keeping at most `limit` bytes in free blocks.
  BlockCache(SystemAllocator system, std::size_t limit);

  /// A block of at least `bytes` bytes, 64-byte aligned, from the cache if one of the same
  /// rounded size is free, else from the system; if the system is out of memory, the cached
  /// blocks are returned to it and the request tried once more. nullptr if it still fails.
  void* acquire(std::size_t bytes);
  /// Returns a block acquired with the same `bytes`; kept for reuse while the cache stays under
  /// its limit, else freed at once.
  void release(void* block, std::size_t bytes);
  /// Frees every cached block.
  void empty();
  /// Sets the most bytes kept in free blocks (0 disables caching; frees what is above it);
  /// returns the previous limit.
  std::size_t set_limit(std::size_t bytes);
  std::size_t cached_bytes();
  std::uint64_t system_allocations();

  /// The size a request is rounded to: a multiple of 64 bytes below 64 KiB, of 4 KiB above
  /// (bins stay few, waste stays under 6%); never 0.
  static std::size_t rounded_size(std::size_t bytes) noexcept;

 private:
  void trim_to(std::size_t limit);  // caller holds mu_

  SystemAllocator system_;
  std::mutex mu_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // rounded size -> free blocks
  std::size_t cached_ = 0;
  std::size_t limit_ = 0;
  std::uint64_t system_allocations_ = 0;
};

}  // namespace mixprec::detail
