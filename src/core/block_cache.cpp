#include "core/block_cache.h"

#include <cstdlib>
#include <string>

namespace mixprec::detail {
namespace {

constexpr std::size_t kAlignment = 64;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kSmall = 64 * 1024;

// Under AddressSanitizer every free must reach the system allocator, or a use after free of a
// tensor's data would read a recycled block instead of being reported.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kDefaultLimit = 0;
#else
constexpr std::size_t kDefaultLimit = std::size_t{1} << 30;  // 1 GiB
#endif

// MIXPREC_CACHE_LIMIT_MB in the environment overrides the default (0 disables the cache).
std::size_t initial_limit() {
  const char* env = std::getenv("MIXPREC_CACHE_LIMIT_MB");
  if (env == nullptr || *env == '\0') return kDefaultLimit;
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(env, &end, 10);
  if (end == env || *end != '\0') return kDefaultLimit;  // not a number: keep the default
  return static_cast<std::size_t>(mb) << 20;
}

void* host_allocate(std::size_t bytes) { return std::aligned_alloc(kAlignment, bytes); }
void host_free(void* block) { std::free(block); }

}  // namespace

BlockCache& BlockCache::instance() {
  // Never destroyed: tensors in static objects may be freed after main returns.
  static BlockCache* cache = new BlockCache({&host_allocate, &host_free}, initial_limit());
  return *cache;
}

BlockCache::BlockCache(SystemAllocator system, std::size_t limit)
    : system_(system), limit_(limit) {}

std::size_t BlockCache::rounded_size(std::size_t bytes) noexcept {
  const std::size_t unit = bytes < kSmall ? kAlignment : kPage;
  const std::size_t rounded = (bytes + unit - 1) / unit * unit;
  return rounded == 0 ? kAlignment : rounded;
}

void* BlockCache::acquire(std::size_t bytes) {
  const std::size_t size = rounded_size(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      cached_ -= size;
      return block;
    }
    ++system_allocations_;
  }
  if (void* block = system_.allocate(size)) return block;
  // Out of memory: what this cache holds may be enough if returned (freed blocks of other sizes).
  empty();
  return system_.allocate(size);
}

void BlockCache::release(void* block, std::size_t bytes) {
  if (block == nullptr) return;
  const std::size_t size = rounded_size(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + size <= limit_) {
      free_[size].push_back(block);
      cached_ += size;
      return;
    }
  }
  system_.free(block);
}

void BlockCache::trim_to(std::size_t limit) {
  for (auto& [size, blocks] : free_) {
    while (cached_ > limit && !blocks.empty()) {
      system_.free(blocks.back());
      blocks.pop_back();
      cached_ -= size;
    }
  }
}

void BlockCache::empty() {
  std::lock_guard<std::mutex> lock(mu_);
  trim_to(0);
  free_.clear();
}

std::size_t BlockCache::set_limit(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t previous = limit_;
  limit_ = bytes;
  trim_to(limit_);
  return previous;
}

std::size_t BlockCache::cached_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

std::uint64_t BlockCache::system_allocations() {
  std::lock_guard<std::mutex> lock(mu_);
  return system_allocations_;
}

}  // namespace mixprec::detail
