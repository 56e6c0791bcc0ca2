#pragma once
/// Validation and slicing of an in-memory Dataset (images [N, D...], one label per sample),
/// whatever file it came from (IDX, CSV, synthetic).
#include <cstdint>
#include <string>

#include "mixprec/data/idx.h"

namespace mixprec::data {

/// Throws ValueError unless every input value of d is finite, naming `what` (e.g. "train data
/// 'x.csv'"), the first bad sample and feature index (row-major within the sample) and whether
/// it is NaN or Inf. d.images: [N, D...] of any float dtype, N == d.labels.size(). One pass at
/// memory bandwidth (a vectorised max-|x| reduction), so it is cheap enough to run on every
/// data set before training: a NaN input otherwise shows up only as an "overflow" that makes
/// a GradScaler skip every step.
void check_finite(const Dataset& d, const std::string& what);

/// Throws ValueError unless every label of d is in [0, num_classes), naming `what`, the first
/// bad sample index and its label; also when the label and sample counts differ or
/// num_classes < 1.
void check_labels(const Dataset& d, std::int64_t num_classes, const std::string& what);

/// A copy (new storage, MemoryCategory::workspace) of samples [begin, begin + count) of d, with
/// images of the same dtype and per-sample shape. ValueError unless 0 <= begin, 0 <= count and
/// begin + count <= N.
Dataset subset(const Dataset& d, std::int64_t begin, std::int64_t count);

}  // namespace mixprec::data
