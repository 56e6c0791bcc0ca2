// fill_random_bits: argument checks, then the active backend's random_bits kernel
// (kernels/random.h; the cpu backend's is the vector Philox of convert_simd.cpp), bit-identical
// to random_bits() on every backend and target.
#include "mixprec/kernels/random_arrays.h"

#include <cstdint>

#include "kernels/convert_checks.h"
#include "kernels/random.h"
#include "mixprec/core/error.h"

namespace mixprec {

void fill_random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out,
                      std::size_t n) {
  MIXPREC_CHECK(n == 0 || out != nullptr, ValueError, "fill_random_bits",
                "out is null with n = " << n << "; pass a buffer of n uint32_t");
  detail::check_counter_offset("fill_random_bits", offset, n);
  kernels::random_bits(seed, offset, out, n);
}

}  // namespace mixprec
