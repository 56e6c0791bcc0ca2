#pragma once
// Epochs of the data layer's loaders (DataLoader, TextWindows, ImageFolderSource): the shuffled
// order, so that one seed visits samples in the same order whatever the source, and the check of
// where BatchSource::start_epoch may begin.
#include <cstdint>
#include <vector>

namespace mixprec::data::detail {

/// A permutation of 0..n-1 that is a pure function of (seed, epoch): Fisher-Yates driven by
/// Philox blocks (core/random.h), so it depends on no thread timing or call order. n >= 0.
std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch);

/// BatchSource::start_epoch's argument check: ValueError from `op` unless epoch >= 0 and
/// 0 <= first_batch <= batches.
void check_epoch_start(const char* op, std::int64_t epoch, std::int64_t first_batch, std::int64_t batches);

}  // namespace mixprec::data::detail
