#pragma once
// Private: the argument checks every public bulk conversion (convert.cpp, convert_fp8.cpp) and
// the Philox fill (random.cpp) make before handing buffers to a backend kernel.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "mixprec/core/error.h"

namespace mixprec::detail {

/// ValueError unless src and dst are non-null (when n > 0), n elements can exist, and the
/// byte ranges [src, src + n * src_size) and [dst, dst + n * dst_size) do not overlap.
inline void check_convert_buffers(const char* op, const void* src, std::size_t src_size,
                                  const void* dst, std::size_t dst_size, std::size_t n) {
  if (n == 0) return;
  MIXPREC_CHECK(src != nullptr && dst != nullptr, ValueError, op,
                "null " << (src == nullptr ? "src" : "dst") << " with n = " << n
                        << "; pass buffers of n elements");
  MIXPREC_CHECK(n <= std::numeric_limits<std::size_t>::max() / 4, ValueError, op,
                "n = " << n << " elements is larger than any buffer can be");
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const bool disjoint = s + n * src_size <= d || d + n * dst_size <= s;
  MIXPREC_CHECK(disjoint, ValueError, op,
                "src and dst overlap; convert into a separate buffer (in-place is not supported)");
}

/// ValueError if elements offset .. offset + n - 1 of a counter-based random stream would
/// pass 2^64.
inline void check_counter_offset(const char* op, std::uint64_t offset, std::size_t n) {
  MIXPREC_CHECK(n <= std::numeric_limits<std::uint64_t>::max() - offset, ValueError, op,
                "offset " << offset << " + n " << n << " overflows the 64-bit element counter; "
                          << "use a new seed instead of a huge offset");
}

}  // namespace mixprec::detail
