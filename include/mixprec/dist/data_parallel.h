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

class ShardedParameters;

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

/// The gradient exchange of one data-parallel step. Every parameter's gradient is copied into
/// one f32 bucket in parameter order (kept across steps, so a step allocates nothing; a model's
/// gradients can be hundreds of MB), the ranks sum it in rank order (deterministic:
/// Communicator::reduce_scatter_sum / allgather), and the sum is divided by the number of ranks.
/// Parameters without a gradient contribute zeros and stay without one.
class GradientSync {
 public:
  /// params: the model's parameters (f32 gradients; ValueError at average() for a 16-bit one).
  /// wire: the format the gradients travel in (sums are f32 either way). shards (not owned,
  /// may be null): ZeRO-1, where each rank needs the mean of its own share only.
  GradientSync(const Communicator& comm, std::vector<Tensor> params, WireDType wire = WireDType::f32,
               const ShardedParameters* shards = nullptr);

  /// Without shards: every gradient becomes the mean over the ranks (an all-reduce).
  /// With shards: only this rank's share of the flat gradient is reduced (a reduce-scatter, half
  /// the traffic); each piece's view (ShardedParameters::pieces) then has as its gradient the
  /// mean, a view of its parameter's gradient carrying the same loss scale, and the rest of
  /// the parameters' gradients is left stale. A no-op for one rank.
  void average();

  /// The bucket, as workspace for other flat exchanges of the same size (e.g. gathering
  /// parameters after a sharded update).
  std::vector<float>& bucket() { return bucket_; }

 private:
  const Communicator* comm_;
  std::vector<Tensor> params_;
  WireDType wire_;
  const ShardedParameters* shards_;
  std::vector<float> bucket_;
};

/// The mean of a per-rank value over the ranks (e.g. a shard's loss), identical on every rank.
double mean_over_ranks(const Communicator& comm, double value);

}  // namespace mixprec::dist
