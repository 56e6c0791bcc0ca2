// fill_random_bits: argument checks, then the cpu backend's vector Philox (kernels/cpu/
// convert_simd.cpp), threaded in fixed chunks; bit-identical to random_bits() on every target.
#include "mixprec/core/random.h"

#include <cstdint>

#include "core/convert_checks.h"
#include "kernels/convert.h"
#include "mixprec/core/error.h"

namespace mixprec {

void fill_random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out,
                      std::size_t n) {
  MIXPREC_CHECK(n == 0 || out != nullptr, ValueError, "fill_random_bits",
                "out is null with n = " << n << "; pass a buffer of n uint32_t");
  detail::check_counter_offset("fill_random_bits", offset, n);
  kernels::cpu::philox_fill(seed, offset, out, n);
}

}  // namespace mixprec
