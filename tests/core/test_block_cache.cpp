// The caching allocator behind Storage: reuse by rounded size, the limit, empty_cache, and that
// the memory tracker keeps counting live tensor bytes (not cached ones).
#include <gtest/gtest.h>

#include "core/block_cache.h"
#include "mixprec/core/memory.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

// Sets the cache limit for one test and restores the previous one (and an empty cache) after.
class CacheLimit {
 public:
  explicit CacheLimit(std::size_t bytes) : previous_(set_cache_limit(bytes)) { empty_cache(); }
  ~CacheLimit() {
    set_cache_limit(previous_);
    empty_cache();
  }

 private:
  std::size_t previous_;
};

TEST(BlockCache, RoundedSizes) {
  using detail::BlockCache;
  EXPECT_EQ(BlockCache::rounded_size(0), 64u);
  EXPECT_EQ(BlockCache::rounded_size(1), 64u);
  EXPECT_EQ(BlockCache::rounded_size(64), 64u);
  EXPECT_EQ(BlockCache::rounded_size(65), 128u);
  EXPECT_EQ(BlockCache::rounded_size(64 * 1024 - 1), 64u * 1024);
  EXPECT_EQ(BlockCache::rounded_size(64 * 1024 + 1), 64u * 1024 + 4096);
  EXPECT_EQ(BlockCache::rounded_size(1 << 20), 1u << 20);
}

TEST(BlockCache, FreedBlockIsReusedWithoutASystemAllocation) {
  CacheLimit limit(std::size_t{64} << 20);
  const void* first = nullptr;
  {
    Tensor t = Tensor::empty({1000, 1000}, DType::f32);
    first = t.data_ptr();
  }
  EXPECT_EQ(memory_stats().cached_bytes, detail::BlockCache::rounded_size(4000000));
  const std::uint64_t before = memory_stats().system_allocations;
  const std::uint64_t tensors_before = memory_stats().allocations;
  Tensor again = Tensor::empty({2000, 500}, DType::f32);  // same byte count
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(memory_stats().system_allocations, before);
  EXPECT_EQ(memory_stats().allocations, tensors_before + 1);
  EXPECT_EQ(memory_stats().cached_bytes, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(again.data_ptr()) % 64, 0u);
}

TEST(BlockCache, DifferentSizeIsNotServedFromTheCache) {
  CacheLimit limit(std::size_t{64} << 20);
  { Tensor t = Tensor::empty({1000}, DType::f32); }
  const std::uint64_t before = memory_stats().system_allocations;
  Tensor other = Tensor::empty({5000}, DType::f32);
  EXPECT_EQ(memory_stats().system_allocations, before + 1);
}

TEST(BlockCache, LimitZeroDisablesCachingAndBlocksOverTheLimitAreFreed) {
  {
    CacheLimit limit(0);
    { Tensor t = Tensor::empty({1000}, DType::f32); }
    EXPECT_EQ(memory_stats().cached_bytes, 0u);
  }
  {
    CacheLimit limit(8192);
    { Tensor big = Tensor::empty({4096}, DType::f32); }  // 16 KiB > limit: freed
    EXPECT_EQ(memory_stats().cached_bytes, 0u);
    { Tensor small = Tensor::empty({1024}, DType::f32); }  // 4 KiB: kept
    EXPECT_EQ(memory_stats().cached_bytes, 4096u);
    set_cache_limit(1024);  // lowering the limit frees what is above it
    EXPECT_EQ(memory_stats().cached_bytes, 0u);
  }
}

TEST(BlockCache, EmptyCacheReleasesEverything) {
  CacheLimit limit(std::size_t{64} << 20);
  { Tensor a = Tensor::empty({100}, DType::f32), b = Tensor::empty({300}, DType::bf16); }
  EXPECT_GT(memory_stats().cached_bytes, 0u);
  empty_cache();
  EXPECT_EQ(memory_stats().cached_bytes, 0u);
}

TEST(BlockCache, TrackerCountsLiveTensorsNotCachedBlocks) {
  CacheLimit limit(std::size_t{64} << 20);
  const std::size_t live_before = memory_stats().total_current;
  {
    Tensor t = Tensor::empty({256, 256}, DType::f32);
    EXPECT_EQ(memory_stats().total_current, live_before + 256 * 256 * 4);
  }
  EXPECT_EQ(memory_stats().total_current, live_before);
}

// A cache over a device's allocator (what cudaMalloc/cudaFree sit behind): a device with room
// for 4 KiB blocks, counting what reaches it.
struct FakeDevice {
  static inline int live = 0, allocations = 0, capacity = 3;
  static void* allocate(std::size_t bytes) {
    if (live == capacity) return nullptr;  // out of memory
    ++live;
    ++allocations;
    return ::operator new(bytes);
  }
  static void release(void* block) {
    --live;
    ::operator delete(block);
  }
};

TEST(BlockCache, OverADeviceAllocatorAStepLoopStopsAllocatingAfterItsFirstStep) {
  FakeDevice::live = FakeDevice::allocations = 0;
  detail::BlockCache cache({&FakeDevice::allocate, &FakeDevice::release}, std::size_t{1} << 20);
  for (int step = 0; step < 5; ++step) {  // each step: two blocks, freed at its end
    void* a = cache.acquire(4096);
    void* b = cache.acquire(4096);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    cache.release(a, 4096);
    cache.release(b, 4096);
  }
  EXPECT_EQ(FakeDevice::allocations, 2);  // the first step's; the rest came from the cache
  cache.empty();
  EXPECT_EQ(FakeDevice::live, 0);
}

TEST(BlockCache, OutOfDeviceMemoryReturnsTheCachedBlocksAndTriesAgain) {
  FakeDevice::live = FakeDevice::allocations = 0;
  detail::BlockCache cache({&FakeDevice::allocate, &FakeDevice::release}, std::size_t{1} << 20);
  // Three small blocks fill the device, then sit in the cache.
  void* small[3];
  for (void*& p : small) p = cache.acquire(1024);
  for (void* p : small) cache.release(p, 1024);
  EXPECT_EQ(FakeDevice::live, 3);
  // A block of another size: the device is full, so the cache gives its blocks back first.
  void* big = cache.acquire(8192);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(FakeDevice::live, 1);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  // Truly out of memory: nullptr, never a crash.
  void* more[2] = {cache.acquire(8192), cache.acquire(8192)};
  EXPECT_NE(more[0], nullptr);
  EXPECT_NE(more[1], nullptr);
  EXPECT_EQ(cache.acquire(8192), nullptr);
  cache.release(big, 8192);
  cache.release(more[0], 8192);
  cache.release(more[1], 8192);
  cache.empty();
  EXPECT_EQ(FakeDevice::live, 0);
}

}  // namespace
}  // namespace mixprec
