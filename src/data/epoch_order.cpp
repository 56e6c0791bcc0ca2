#include "data/epoch_order.h"

#include <numeric>
#include <utility>

#include "mixprec/core/error.h"
#include "mixprec/core/random.h"

namespace mixprec::data::detail {
namespace {

// Keeps the shuffling stream apart from other users of the same seed (e.g. Tensor::randn
// initialising weights with seed 0 as well).
constexpr std::uint64_t kShuffleSalt = 0x5348'5546'464C'4531ull;  // "SHUFFLE1"

}  // namespace

// Fisher-Yates with Philox draws: step i (from n-1 down to 1) uses block i of the epoch's key,
// a 64-bit number reduced modulo i + 1 (bias below (i + 1) / 2^64, far below anything a
// training run can notice).
std::vector<std::int64_t> epoch_permutation(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  const Philox::Counter k = Philox::block(seed ^ kShuffleSalt, static_cast<std::uint64_t>(epoch));
  const std::uint64_t key = (std::uint64_t{k[1]} << 32) | k[0];
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  for (std::int64_t i = n - 1; i >= 1; --i) {
    const Philox::Counter r = Philox::block(key, static_cast<std::uint64_t>(i));
    const std::uint64_t bits = (std::uint64_t{r[1]} << 32) | r[0];
    const auto j = static_cast<std::int64_t>(bits % static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

void check_epoch_start(const char* op, std::int64_t epoch, std::int64_t first_batch, std::int64_t batches) {
  MIXPREC_CHECK(epoch >= 0, ValueError, op, "epoch must be >= 0, got " << epoch);
  MIXPREC_CHECK(first_batch >= 0 && first_batch <= batches, ValueError, op,
                "first_batch " << first_batch << " is outside [0, " << batches << "] (the epoch has " << batches
                               << " batches)");
}

}  // namespace mixprec::data::detail
