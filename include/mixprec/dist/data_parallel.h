#pragma once
/// Data parallelism over a Communicator: each rank trains on its share of every global batch and
/// the ranks average their gradients before unscaling and clipping, so N ranks x B/N samples
/// take the same optimizer step as 1 rank x B (up to the order of the f32 additions).
#include <cstddef>
#include <memory>
#include <vector>

#include "mixprec/tensor/tensor.h"
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

/// The gradient exchange of one data-parallel step, overlapped with backward. The parameters
/// are laid end to end in one flat f32 buffer (kept across steps, so a step allocates nothing;
/// a model's gradients can be hundreds of MB) and grouped into buckets of about bucket_bytes,
/// last parameters first (the order backward produces them, as in PyTorch's DDP). After arm(),
/// each parameter's gradient is copied into the buffer as soon as backward has accumulated it
/// (runtime::set_post_accumulate_grad_hook), and a bucket whose parameters are all there starts
/// its reduce-scatter (Communicator::start_reduce_scatter_sum) while backward goes on.
/// average() sends what is left, finishes every bucket, and divides by the number of ranks. The
/// sums are the same rank-ordered f32 sums whatever the timing, so results never depend on it.
/// Parameters without a gradient contribute zeros and stay without one.
class GradientSync {
 public:
  /// PyTorch DDP's default bucket size.
  static constexpr std::size_t kDefaultBucketBytes = std::size_t{25} << 20;

  /// params: the model's parameters (f32 gradients; ValueError at average() for a 16-bit one).
  /// wire: the format the gradients travel in (sums are f32 either way). shards (not owned,
  /// may be null): ZeRO-1, where each rank needs the mean of its own share only. With more than
  /// one rank, installs a post-accumulate hook on every parameter (removed by the destructor).
  GradientSync(const Communicator& comm, std::vector<Tensor> params, WireDType wire = WireDType::f32,
               const ShardedParameters* shards = nullptr, std::size_t bucket_bytes = kDefaultBucketBytes);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  /// Call before the backward of a step's last micro-batch: its gradients are final, so they
  /// may leave as they appear. Without arm(), average() sends everything itself.
  void arm();

  /// Without shards: every gradient becomes the mean over the ranks (an all-reduce).
  /// With shards: only this rank's share of the flat gradient is reduced (a reduce-scatter, half
  /// the traffic); each piece's view (ShardedParameters::pieces) then has as its gradient the
  /// mean, a view of its parameter's gradient carrying the same loss scale, and the rest of
  /// the parameters' gradients is left stale. A no-op for one rank.
  void average();

  /// The flat buffer, as workspace for other exchanges of the same size (e.g. gathering
  /// parameters after a sharded update).
  std::vector<float>& bucket() { return flat_; }
  /// Buckets in all, and how many of them the last average() found already sent by backward.
  std::size_t bucket_count() const { return buckets_.size(); }
  std::size_t buckets_sent_early() const { return sent_early_; }

 private:
  struct Bucket {
    Shard range;                                // in the flat buffer
    std::size_t params = 0, waiting = 0;        // parameters in it; not yet copied this step
    std::unique_ptr<PendingReduction> pending;  // set once sent
  };
  void on_gradient(std::size_t param);
  void copy_in(std::size_t param);
  void send(std::size_t bucket);

  const Communicator* comm_;
  std::vector<Tensor> params_;
  WireDType wire_;
  const ShardedParameters* shards_;
  std::vector<std::size_t> offsets_;       // flat offset per parameter
  std::vector<std::size_t> bucket_of_;     // per parameter
  std::vector<Bucket> buckets_;
  std::vector<bool> copied_;               // per parameter, this step
  std::vector<float> flat_;
  std::size_t total_ = 0, sent_early_ = 0;
  bool armed_ = false, stale_ = false;
};

/// The mean of a per-rank value over the ranks (e.g. a shard's loss), identical on every rank.
double mean_over_ranks(const Communicator& comm, double value);

}  // namespace mixprec::dist
