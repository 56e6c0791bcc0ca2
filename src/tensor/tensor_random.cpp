// Random tensor factories: every element is a pure function of (seed, index), so a tensor's
// values do not depend on threading or on how it is split.
#include <cmath>
#include <numbers>
#include <string>

#include "core/device_graph.h"
#include "core/parallel_chunks.h"
#include "kernels/random.h"
#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/core/random.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

// A captured graph would replay the seed the host passes now: the same numbers at every replay.
void refuse_capture(const char* factory) {
  detail::note_capture_refusal(std::string(factory) + " draws from a seed the host picks at each "
                               "call (dropout's mask, say), which a graph would replay unchanged: "
                               "train without dropout or with --cuda-graphs off");
}

}  // namespace

Tensor Tensor::uniform(const Shape& shape, std::uint64_t seed, float low, float high, DType dtype) {
  MIXPREC_CHECK(low <= high, ValueError, "Tensor::uniform",
                "low (" << low << ") must not exceed high (" << high << ")");
  refuse_capture("Tensor::uniform");
  Tensor t = empty(shape, dtype);
  kernels::random_uniform(t.data_ptr(), dtype, t.numel(), seed, 0, low, high);
  return t;
}

Tensor Tensor::randn(const Shape& shape, std::uint64_t seed, DType dtype, float mean, float stddev) {
  refuse_capture("Tensor::randn");
  const std::int64_t n = mixprec::numel(shape);
  std::vector<float> values(static_cast<std::size_t>(n));
  // Across threads in fixed chunks (a model's initial weights are tens of millions of draws);
  // each element depends on (seed, i) alone, so the values are the same on any thread count.
  detail::for_chunks(values.size(), [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      // Box-Muller on the pair of uniforms (2i, 2i+1); 1 - u keeps the log argument in (0, 1].
      const auto k = static_cast<std::uint64_t>(i);
      const double u1 = 1.0 - static_cast<double>(mixprec::uniform(seed, 2 * k));
      const double u2 = static_cast<double>(mixprec::uniform(seed, 2 * k + 1));
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      values[i] = mean + stddev * static_cast<float>(z);
    }
  });
  return from_vector(values, shape, dtype);
}

}  // namespace mixprec
