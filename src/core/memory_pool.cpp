#include "core/memory_pool.h"

#include "core/block_cache.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec::detail {

MemoryPool::~MemoryPool() {
  for (const auto& [block, bytes] : owned_) device_release(block, bytes, device_);
}

void* MemoryPool::acquire(std::size_t bytes) {
  const std::size_t rounded = BlockCache::rounded_size(bytes);
  {
    const std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(rounded);
    if (it != free_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      return block;
    }
  }
  void* block = device_allocate(rounded, device_);
  MIXPREC_CHECK(block != nullptr, BackendError, "graph memory pool",
                to_string(device_) << " is out of memory: " << rounded << " bytes asked for");
  const std::lock_guard<std::mutex> lock(mu_);
  owned_.emplace_back(block, rounded);
  return block;
}

void MemoryPool::release(void* block, std::size_t bytes) {
  if (block == nullptr) return;
  const std::lock_guard<std::mutex> lock(mu_);
  free_[BlockCache::rounded_size(bytes)].push_back(block);
}

std::size_t MemoryPool::reserved_bytes() const {
  const std::lock_guard<std::mutex> lock(mu_);
  std::size_t total = 0;
  for (const auto& [block, bytes] : owned_) total += bytes;
  return total;
}

}  // namespace mixprec::detail
