#pragma once
/// Data parallelism over a Communicator: each rank trains on its share of every global batch and
/// the ranks average their gradients before unscaling and clipping, so N ranks x B/N samples
/// take the same optimizer step as 1 rank x B (up to the order of the f32 additions).
#include <memory>
#include <vector>

#include "mixprec/core/tensor.h"
#include "mixprec/data/batch_source.h"
#include "mixprec/dist/communicator.h"

namespace mixprec::dist {

/// This rank's rows of each batch of `global`: rank r of N gets rows [r*B/N, (r+1)*B/N) and
/// their targets (targets per row = targets / B, so language-model batches split by window).
/// The union of the shards is the global batch, so `--batch-size` stays the global batch.
/// next() throws ValueError when a batch's size B does not divide by N (naming --batch-size).
class ShardedBatches : public data::BatchSource {
 public:
  ShardedBatches(std::shared_ptr<data::BatchSource> global, int rank, int size);
  std::int64_t batches_per_epoch() const override;
  void start_epoch(std::int64_t epoch, std::int64_t first_batch = 0) override;
  bool next(data::Batch& out) override;

 private:
  std::shared_ptr<data::BatchSource> global_;
  int rank_, size_;
};

/// Replaces every parameter's gradient by its mean over the ranks: one f32 buffer holding all
/// gradients in parameter order (one bucket), summed in rank order (Communicator::allreduce_sum,
/// deterministic) and divided by size. Parameters without a gradient contribute zeros and stay
/// without one. ValueError for a gradient that is not f32 (16-bit parameters: pure-bf16 modes).
/// A no-op for one rank. `bucket` is the caller's workspace, kept across steps so that a step
/// allocates nothing (a model's gradients can be hundreds of MB).
void average_gradients(const Communicator& comm, const std::vector<Tensor>& params,
                       std::vector<float>& bucket);

/// The mean of a per-rank value over the ranks (e.g. a shard's loss), identical on every rank.
double mean_over_ranks(const Communicator& comm, double value);

}  // namespace mixprec::dist
