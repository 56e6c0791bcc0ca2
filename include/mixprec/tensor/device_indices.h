#pragma once
/// Integer indices already on a device: mixprec has no integer tensor dtype, so the class ids a
/// loss compares against travel as int64 elements in a Storage of their own. Ops that take
/// std::vector indices upload them at every call; a caller that must not transfer inside its
/// step (a captured graph, train/step_graphs.h) uploads them once into one of these and passes
/// it instead.
#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/core/storage.h"

namespace mixprec {

struct DeviceIndices {
  std::shared_ptr<Storage> storage;  ///< int64 elements on the device; null when not given
  std::int64_t count = 0;

  bool defined() const { return storage != nullptr; }
};

/// The indices uploaded to a new storage on the current device (one upload).
DeviceIndices upload_indices(const std::vector<std::int64_t>& indices);
/// Overwrites `into` (count must match: ShapeError otherwise) with `indices`: one upload into the
/// same memory, so a captured graph that reads `into` sees the new values.
void upload_indices_into(const DeviceIndices& into, const std::vector<std::int64_t>& indices);

/// Overwrites `into` with `from` (the same count: ShapeError otherwise; the same device): a
/// device copy, nothing crosses to the host and nothing waits.
void copy_indices_into(const DeviceIndices& into, const DeviceIndices& from);

}  // namespace mixprec
