#include "mixprec/core/storage.h"

#include "core/block_cache.h"
#include "mixprec/core/error.h"

namespace mixprec {

Storage::Storage(std::size_t bytes, MemoryCategory category) : bytes_(bytes), category_(category) {
  data_ = detail::BlockCache::instance().acquire(bytes);
  MIXPREC_CHECK(data_ != nullptr, ValueError, "Storage",
                "out of memory allocating " << bytes << " bytes; reduce the batch size or model");
  detail::track_alloc(category_, bytes_);
}

Storage::~Storage() {
  detail::track_free(category_, bytes_);
  detail::BlockCache::instance().release(data_, bytes_);
}

void Storage::set_category(MemoryCategory category) {
  detail::track_move(category_, category, bytes_);
  category_ = category;
}

}  // namespace mixprec
