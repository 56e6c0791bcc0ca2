#pragma once
// A bounded, thread-safe LRU cache of oneDNN primitives (or of the verdict that none is usable),
// keyed by everything a primitive depends on. The matmul and convolution bridges each keep one:
// creating a primitive costs far more than running a small one.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace mixprec::kernels::cpu {

/// Folds v into a running hash (the boost::hash_combine recipe), for the caches' key hashes.
inline void hash_mix(std::size_t& h, std::uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }

template <class Key, class Entry, class KeyHash, std::size_t Capacity>
class PrimitiveCache {
 public:
  /// The entry for key, now the most recently used; null if absent.
  std::shared_ptr<const Entry> find(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    hits_.fetch_add(1, std::memory_order_relaxed);
    return it->second->second;
  }
  /// Inserts unless another thread raced us to it; returns the entry now cached. The least
  /// recently used entry goes when full (callers still running it hold their own shared_ptr).
  std::shared_ptr<const Entry> insert(const Key& key, std::shared_ptr<const Entry> entry) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) return it->second->second;
    if (lru_.size() >= Capacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    lru_.emplace_front(key, std::move(entry));
    index_.emplace(key, lru_.begin());
    return lru_.front().second;
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return lru_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    index_.clear();
    lru_.clear();
  }
  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::list<std::pair<Key, std::shared_ptr<const Entry>>> lru_;  // most recently used first
  std::unordered_map<Key, typename decltype(lru_)::iterator, KeyHash> index_;
  std::atomic<std::uint64_t> hits_{0};
};

}  // namespace mixprec::kernels::cpu
