#pragma once
// The shuffled order of an epoch, shared by every loader of the data layer (DataLoader,
// ImageFolderSource), so that one seed visits samples in the same order whatever the source.
#include <cstdint>
#include <vector>

namespace mixprec::data::detail {

/// A permutation of 0..n-1 that is a pure function of (seed, epoch): Fisher-Yates driven by
/// Philox blocks (core/random.h), so it depends on no thread timing or call order. n >= 0.
std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch);

}  // namespace mixprec::data::detail
