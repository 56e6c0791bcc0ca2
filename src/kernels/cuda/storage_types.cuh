#pragma once
// The host's element types for every dtype as kernel template arguments (dispatch_storage,
// kernels/spec/storage_dispatch.h, shared with the reference), and same-size unsigned words for
// kernels that only move bits. Included by .cu files only.
#include <cstddef>
#include <cstdint>

#include "kernels/spec/storage_dispatch.h"

namespace mixprec::kernels::cuda {

/// Calls f(W{}) with the unsigned word of `bytes` bytes (1, 2 or 4: every dtype's size).
template <class F>
void with_word_of_size(std::size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(std::uint8_t{});
    case 2: return f(std::uint16_t{});
    default: return f(std::uint32_t{});
  }
}

}  // namespace mixprec::kernels::cuda
