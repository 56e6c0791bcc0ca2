#pragma once
/// Memory accounting by category: every tensor storage reports its bytes here, so peak memory can
/// be reported exactly per category (parameters, gradients, optimizer state, activations, ...).
/// Storage blocks come from a caching allocator: a freed block is kept and handed to the next
/// tensor of the same rounded size, so steady-state training steps make no system allocations.
/// The categories count bytes held by live tensors; cached_bytes counts the free blocks kept.
#include <array>
#include <cstddef>
#include <cstdint>

namespace mixprec {

/// What a block of memory holds; parameters and optimizer state are what "bytes per parameter" counts.
enum class MemoryCategory : std::uint8_t {
  parameter, gradient, optimizer_state, activation, workspace
};
inline constexpr std::size_t kMemoryCategoryCount = 5;
/// "parameter", "gradient", "optimizer_state", "activation", "workspace".
const char* name(MemoryCategory category);

/// A snapshot of the tracker: current and peak bytes per category and in total.
struct MemoryStats {
  std::array<std::size_t, kMemoryCategoryCount> current{};
  std::array<std::size_t, kMemoryCategoryCount> peak{};
  std::size_t total_current = 0;
  std::size_t total_peak = 0;        ///< peak of the sum (not the sum of per-category peaks)
  std::uint64_t allocations = 0;     ///< number of storage allocations since start
  /// Storage allocations the cache could not serve, i.e. calls to the system allocator.
  std::uint64_t system_allocations = 0;
  std::size_t cached_bytes = 0;      ///< bytes in free blocks the cache keeps for reuse
  std::size_t current_of(MemoryCategory c) const { return current[static_cast<std::size_t>(c)]; }
  std::size_t peak_of(MemoryCategory c) const { return peak[static_cast<std::size_t>(c)]; }
};

/// Current statistics (thread-safe).
MemoryStats memory_stats();
/// Resets every peak to the current value (per category and total).
void reset_peak_memory();
/// The process's peak resident set size so far (getrusage ru_maxrss), in bytes: everything the
/// process touched, not only tensors; what peak-memory comparisons with other frameworks use.
std::size_t peak_resident_bytes();
/// Returns every cached free block to the system (like torch.cuda.empty_cache()).
void empty_cache();
/// Sets the most bytes the cache keeps in free blocks and returns the previous limit; 0 turns
/// caching off. Default 1 GiB (0 under AddressSanitizer, so use-after-free stays detectable);
/// the environment variable MIXPREC_CACHE_LIMIT_MB sets the default.
std::size_t set_cache_limit(std::size_t bytes);

namespace detail {
/// Storage calls these; bytes move between categories with track_move.
void track_alloc(MemoryCategory category, std::size_t bytes);
void track_free(MemoryCategory category, std::size_t bytes);
void track_move(MemoryCategory from, MemoryCategory to, std::size_t bytes);
}  // namespace detail

}  // namespace mixprec
