#include "mixprec/core/memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <mutex>

#include "core/block_cache.h"

namespace mixprec {
namespace {

// A mutex, not atomics: peaks of the total need current values of every category at once, and
// allocations are coarse (one per tensor), so contention is negligible.
struct Tracker {
  std::mutex mu;
  MemoryStats stats;

  void update_peaks(std::size_t idx) {
    stats.peak[idx] = std::max(stats.peak[idx], stats.current[idx]);
    stats.total_peak = std::max(stats.total_peak, stats.total_current);
  }
};

Tracker& tracker() {
  static Tracker t;
  return t;
}

}  // namespace

const char* name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::parameter: return "parameter";
    case MemoryCategory::gradient: return "gradient";
    case MemoryCategory::optimizer_state: return "optimizer_state";
    case MemoryCategory::activation: return "activation";
    case MemoryCategory::workspace: return "workspace";
  }
  return "?";
}

MemoryStats memory_stats() {
  Tracker& t = tracker();
  MemoryStats stats;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    stats = t.stats;
  }
  stats.system_allocations = detail::BlockCache::instance().system_allocations();
  stats.cached_bytes = detail::BlockCache::instance().cached_bytes();
  return stats;
}

void empty_cache() { detail::BlockCache::instance().empty(); }

std::size_t set_cache_limit(std::size_t bytes) {
  return detail::BlockCache::instance().set_limit(bytes);
}

std::size_t peak_resident_bytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

void reset_peak_memory() {
  Tracker& t = tracker();
  std::lock_guard<std::mutex> lock(t.mu);
  t.stats.peak = t.stats.current;
  t.stats.total_peak = t.stats.total_current;
}

namespace detail {

void track_alloc(MemoryCategory category, std::size_t bytes) {
  Tracker& t = tracker();
  const auto idx = static_cast<std::size_t>(category);
  std::lock_guard<std::mutex> lock(t.mu);
  t.stats.current[idx] += bytes;
  t.stats.total_current += bytes;
  ++t.stats.allocations;
  t.update_peaks(idx);
}

void track_free(MemoryCategory category, std::size_t bytes) {
  Tracker& t = tracker();
  const auto idx = static_cast<std::size_t>(category);
  std::lock_guard<std::mutex> lock(t.mu);
  t.stats.current[idx] -= bytes;
  t.stats.total_current -= bytes;
}

void track_move(MemoryCategory from, MemoryCategory to, std::size_t bytes) {
  if (from == to) return;
  Tracker& t = tracker();
  std::lock_guard<std::mutex> lock(t.mu);
  t.stats.current[static_cast<std::size_t>(from)] -= bytes;
  t.stats.current[static_cast<std::size_t>(to)] += bytes;
  t.update_peaks(static_cast<std::size_t>(to));
}

}  // namespace detail
}  // namespace mixprec
