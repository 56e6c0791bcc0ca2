#include "mixprec/tensor/device_indices.h"

#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec {

DeviceIndices upload_indices(const std::vector<std::int64_t>& indices) {
  DeviceIndices d;
  d.count = static_cast<std::int64_t>(indices.size());
  d.storage = std::make_shared<Storage>(indices.size() * sizeof(std::int64_t), MemoryCategory::workspace);
  upload_indices_into(d, indices);
  return d;
}

void upload_indices_into(const DeviceIndices& into, const std::vector<std::int64_t>& indices) {
  MIXPREC_CHECK(into.defined(), ValueError, "upload_indices_into", "no device indices to write");
  MIXPREC_CHECK(static_cast<std::int64_t>(indices.size()) == into.count, ShapeError,
                "upload_indices_into",
                indices.size() << " indices for a device array of " << into.count);
  const TransferReason why("device indices");
  upload(into.storage->data(), indices.data(), indices.size() * sizeof(std::int64_t),
         into.storage->device());
}

void copy_indices_into(const DeviceIndices& into, const DeviceIndices& from) {
  MIXPREC_CHECK(into.defined() && from.defined(), ValueError, "copy_indices_into",
                "no device indices to copy");
  MIXPREC_CHECK(into.count == from.count, ShapeError, "copy_indices_into",
                from.count << " indices for a device array of " << into.count);
  device_copy(into.storage->data(), from.storage->data(),
              static_cast<std::size_t>(into.count) * sizeof(std::int64_t), into.storage->device());
}

}  // namespace mixprec
