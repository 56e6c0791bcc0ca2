#include "mixprec/core/storage.h"

#include <cstdlib>
#include <new>

#include "mixprec/core/error.h"

namespace mixprec {

Storage::Storage(std::size_t bytes, MemoryCategory category) : bytes_(bytes), category_(category) {
  // aligned_alloc needs a size that is a multiple of the alignment, and never 0.
  const std::size_t rounded = ((bytes + kAlignment - 1) / kAlignment) * kAlignment;
  data_ = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  MIXPREC_CHECK(data_ != nullptr, ValueError, "Storage",
                "out of memory allocating " << bytes << " bytes; reduce the batch size or model");
  detail::track_alloc(category_, bytes_);
}

Storage::~Storage() {
  detail::track_free(category_, bytes_);
  std::free(data_);
}

void Storage::set_category(MemoryCategory category) {
  detail::track_move(category_, category, bytes_);
  category_ = category;
}

}  // namespace mixprec
