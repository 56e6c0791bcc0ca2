#include "mixprec/core/storage.h"

#include "core/device_graph.h"
#include "core/memory_pool.h"

#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"

namespace mixprec {

Storage::Storage(std::size_t bytes, MemoryCategory category, Device device)
    : bytes_(bytes), category_(category), device_(device) {
  // Inside a graph capture on this thread: from the capture's private pool (core/memory_pool.h).
  pool_ = detail::capture_pool(device);
  data_ = pool_ ? pool_->acquire(bytes) : detail::device_allocate(bytes, device);
  MIXPREC_CHECK(data_ != nullptr, ValueError, "Storage",
                "out of memory allocating " << bytes << " bytes on " << to_string(device)
                                          << "; reduce the batch size or model");
  // The tracker counts the memory of the device that computes: on a device run, host staging
  // buffers (a batch before its upload) are not device memory and stay out of the peaks.
  tracked_ = device == current_device();
  if (tracked_) detail::track_alloc(category_, bytes_);
}

Storage::~Storage() {
  if (tracked_) detail::track_free(category_, bytes_);
  if (pool_) {
    pool_->release(data_, bytes_);
  } else {
    detail::device_release(data_, bytes_, device_);
  }
}

void Storage::set_category(MemoryCategory category) {
  if (tracked_) detail::track_move(category_, category, bytes_);
  category_ = category;
}

}  // namespace mixprec
