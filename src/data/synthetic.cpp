#include "mixprec/core/transfer.h"
#include "mixprec/data/synthetic.h"

#include <algorithm>

#include "mixprec/core/error.h"
#include "mixprec/ops/nn_functional.h"

namespace mixprec::data {

Dataset make_synthetic(std::int64_t n, std::int64_t features, std::int64_t classes,
                       std::uint64_t seed, std::uint64_t split) {
  MIXPREC_CHECK(n >= 1 && features >= 1 && classes >= 2, ValueError, "make_synthetic",
                "needs n >= 1, features >= 1 and classes >= 2 (got n=" << n << ", features="
                    << features << ", classes=" << classes << ")");
  Dataset d;
  // Distinct Philox streams: the teacher from seed, each split's inputs from (seed, split).
  const std::uint64_t input_seed = seed * 0x9E3779B97F4A7C15ull + 2 * split + 1;
  d.images = Tensor::randn({n, features}, input_seed);
  const Tensor teacher = Tensor::randn({features, classes}, seed * 0x9E3779B97F4A7C15ull);
  const std::vector<float> scores = matmul(d.images, teacher).to_vector();
  {
    const TransferReason why("data set to the host");
    d.images = d.images.to(Device{});  // data sets live on the host; the loader uploads batches
  }
  d.labels.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto row = scores.begin() + i * classes;
    d.labels[static_cast<std::size_t>(i)] = std::max_element(row, row + classes) - row;
  }
  return d;
}

}  // namespace mixprec::data
