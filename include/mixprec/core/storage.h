#pragma once
/// A 64-byte aligned block of bytes on one device, owned by one or more tensors, tracked by memory
/// category.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "mixprec/core/device.h"
#include "mixprec/core/memory.h"

namespace mixprec {
namespace detail {
class MemoryPool;
}

/// Owns an aligned allocation; reports its size to the memory tracker under its category.
/// The version counter increases on every in-place write, so caches of derived values (e.g.
/// autocast's cached bf16 copy of a weight) can tell when they are stale.
class Storage {
 public:
  static constexpr std::size_t kAlignment = 64;
  /// Allocates `bytes` (uninitialised, 64-byte aligned) under `category` on `device` (through
  /// that device's allocator: the host block cache for cpu).
  Storage(std::size_t bytes, MemoryCategory category, Device device = current_device());
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The block's address on its device: dereferenceable by the host only if device().is_host().
  void* data() noexcept { return data_; }
  const void* data() const noexcept { return data_; }
  std::size_t bytes() const noexcept { return bytes_; }
  MemoryCategory category() const noexcept { return category_; }
  Device device() const noexcept { return device_; }
  /// Re-files the bytes under another category (e.g. a tensor that becomes a parameter).
  void set_category(MemoryCategory category);
  /// Incremented by every in-place modification.
  std::uint64_t version() const noexcept { return version_.load(std::memory_order_relaxed); }
  void bump_version() noexcept { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryCategory category_;
  Device device_;
  bool tracked_ = false;  // counted by the memory tracker (memory of the current device)
  // The graph capture's private pool the block came from and returns to (null: the device's
  // allocator); see core/device_graph.h.
  std::shared_ptr<detail::MemoryPool> pool_;
  std::atomic<std::uint64_t> version_{0};
};

}  // namespace mixprec
