#pragma once
/// Synthetic classification data for benchmarks and for the seeds' MLP, which has no real dataset:
/// Gaussian inputs labelled by a fixed random linear "teacher", so a model can learn them.
#include <cstdint>

#include "mixprec/data/idx.h"

namespace mixprec::data {

/// n samples of `features` standard-normal f32 values (drawn from (seed, split)), each labelled
/// with argmax over classes of x . T[:, c], where the teacher T [features, classes] comes from
/// seed alone; so a train split (split 0) and a test split (split 1) share one labelling rule.
/// ValueError unless n >= 1, features >= 1 and classes >= 2.
Dataset make_synthetic(std::int64_t n, std::int64_t features, std::int64_t classes,
                       std::uint64_t seed, std::uint64_t split);

}  // namespace mixprec::data
