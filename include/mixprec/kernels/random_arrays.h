#pragma once
/// Counter-based random bits in bulk: the active backend's random_bits kernel
/// (src/kernels/random.h) behind argument checks, an entry point of the kernels floor
/// (src/kernels/api_random.cpp). The stream itself, scalar and constexpr, is core/random.h.
#include <cstddef>
#include <cstdint>

namespace mixprec {

/// out[i] = random_bits(seed, offset + i) of core/random.h for i < n; vectorised and threaded
/// for large n, bit-identical to the scalar definition whatever the ISA or thread count.
/// ValueError if out is null with n > 0 or if offset + n overflows 64 bits.
void fill_random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n);

}  // namespace mixprec
