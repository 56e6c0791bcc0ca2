#pragma once
/// Counter-based random numbers as backend kernels: every element is a pure function of
/// (seed, offset + i) as random.h defines it (Philox4x32-10), so a backend reproduces the stream
/// exactly, whatever its vector width or thread count. kernels::ref:: is the spec (the scalar
/// definitions of random.h); kernels:: dispatches to the active backend.
#include <cstddef>
#include <cstdint>

#include "mixprec/core/dtype.h"
#include "kernels/entry_point.h"

namespace mixprec::kernels {

namespace ref {
/// out[i] = random_bits(seed, offset + i) of random.h, n 32-bit words (the caller checks that
/// offset + n does not overflow).
void random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n);
/// out[i] = low + (high - low) * uniform(seed, offset + i), computed in f32 (no fused
/// multiply-add) and rounded once to dtype (any dtype, fp8 included). Dropout masks and
/// Tensor::uniform are drawn with it.
void random_uniform(void* out, DType dtype, std::int64_t n, std::uint64_t seed,
                    std::uint64_t offset, float low, float high);
}  // namespace ref

/// The random kernels, in table order: kernels::<name> forwards to the active backend
/// (kernels/entry_point.h); each backend implements ref::<name>'s signature.
#define MIXPREC_RANDOM_KERNELS(X) X(random_bits) X(random_uniform)
MIXPREC_RANDOM_KERNELS(MIXPREC_ENTRY_POINT)

}  // namespace mixprec::kernels
