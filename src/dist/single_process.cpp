// SingleProcess: the collectives of a group of one.
#include "mixprec/dist/single_process.h"

#include "mixprec/core/error.h"

namespace mixprec::dist {

void SingleProcess::reduce_scatter_sum(float* data, std::size_t n, WireDType) const {
  MIXPREC_CHECK(data != nullptr || n == 0, ValueError, "dist.reduce_scatter_sum",
                "data is null but n = " << n << "; pass a buffer of n floats (or n = 0)");
}

namespace {
struct NothingPending final : PendingReduction {
  void progress() override {}
  void finish() override {}
};
}  // namespace

std::unique_ptr<PendingReduction> SingleProcess::start_reduce_scatter_sum(float* data, std::size_t n, Shard range,
                                                                          int, WireDType) const {
  MIXPREC_CHECK((data != nullptr || n == 0) && range.end() <= n, ValueError, "dist.start_reduce_scatter_sum",
                "needs a buffer of n = " << n << " floats and a range inside it, got [" << range.begin << ", "
                                         << range.end() << ")");
  return std::make_unique<NothingPending>();
}

void SingleProcess::allgather(float* data, std::size_t n, WireDType) const {
  MIXPREC_CHECK(data != nullptr || n == 0, ValueError, "dist.allgather",
                "data is null but n = " << n << "; pass a buffer of n floats (or n = 0)");
}

void SingleProcess::broadcast(std::string&, int root) const {
  MIXPREC_CHECK(root == 0, ValueError, "dist.broadcast",
                "root " << root << " is not a rank of a single-process group; use root 0");
}

}  // namespace mixprec::dist
