// Reference random kernels: the scalar definitions of random.h, element by element.
#include <vector>

#include "kernels/convert.h"
#include "kernels/random.h"
#include "mixprec/core/random.h"

namespace mixprec::kernels::ref {

void random_bits(std::uint64_t seed, std::uint64_t offset, std::uint32_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = mixprec::random_bits(seed, offset + i);
}

void random_uniform(void* out, DType dtype, std::int64_t n, std::uint64_t seed,
                    std::uint64_t offset, float low, float high) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = low + (high - low) * mixprec::uniform(seed, offset + i);
  }
  ref::convert(v.data(), DType::f32, out, dtype, v.size());
}

}  // namespace mixprec::kernels::ref
