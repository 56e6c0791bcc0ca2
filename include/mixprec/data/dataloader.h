#pragma once
/// Mini-batches of an in-memory Dataset in a shuffled order that depends only on (seed, epoch),
/// optionally assembled one batch ahead on a background thread while the caller trains.
///
///   DataLoaderOptions opts;
///   opts.seed = 42;
///   DataLoader loader(train, opts, {1, 28, 28});  // inputs [128, 1, 28, 28]
///   for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
///     loader.start_epoch(epoch);
///     for (Batch b; loader.next(b);) train_step(b.inputs, b.targets);
///   }
#include <cstdint>
#include <memory>
#include <vector>

#include "mixprec/tensor/tensor.h"
#include "mixprec/data/batch_source.h"
#include "mixprec/data/idx.h"

namespace mixprec::data {

/// How a DataLoader cuts and orders the data.
struct DataLoaderOptions {
  /// Samples per batch (>= 1); the last batch of an epoch may be smaller unless drop_last.
  std::int64_t batch_size = 128;
  /// Visit the samples in a fresh random order each epoch (false: in data set order).
  bool shuffle = true;
  /// Seed of the shuffling: the order of epoch e is a pure function of (seed, e).
  std::uint64_t seed = 0;
  /// Skip the last batch of an epoch when it would hold fewer than batch_size samples.
  bool drop_last = false;
  /// Assemble the next batch on a background thread (same batches as without).
  bool prefetch = true;
};

/// Iterates a Dataset in mini-batches, epoch by epoch. Holds its own handle to the data (the
/// caller's Dataset may go away). Used from one thread at a time; not copyable or movable.
///
/// Errors found while assembling a batch (a non-finite input value, an allocation failure) are
/// thrown by the next() call that would have returned that batch, after every earlier batch
/// was returned, with or without prefetch; the epoch then counts as finished. Non-finite inputs
/// are checked per row as it is copied (cheap: the row is in cache) because a NaN input
/// otherwise surfaces only as an "overflow" that makes a GradScaler skip every step; run
/// check_finite (dataset.h) before training to find them all up front.
class DataLoader : public BatchSource {
 public:
  /// data.images: [N, ...] of any float dtype (converted to f32 once here if needed), N >= 1,
  /// with N labels >= 0 (or, regression data, N values and no labels: Batch::values then).
  /// sample_shape: the shape of one sample in Batch::inputs, e.g.
  /// {1, 28, 28} for 784-feature images; empty: the data's own per-sample shape (images
  /// [N, D] give [B, D]). ValueError if the data set is empty, labels are missing or
  /// negative, batch_size < 1, drop_last leaves no batch (batch_size > N), or sample_shape
  /// has a dimension < 1 or a number of elements other than the data's per-sample count.
  DataLoader(const Dataset& data, DataLoaderOptions opts, std::vector<std::int64_t> sample_shape = {});
  /// Stops and joins the prefetch thread, dropping any batch it had ready.
  ~DataLoader() override;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Batches in one epoch: ceil(N / batch_size), or floor(N / batch_size) with drop_last.
  std::int64_t batches_per_epoch() const override;
  /// Number of samples N in the data set.
  std::int64_t size() const;
  /// The options in effect.
  const DataLoaderOptions& options() const;

  /// Begins epoch `epoch` (>= 0) at batch first_batch (0 <= first_batch <= batches_per_epoch();
  /// a resumed run passes the number of batches it already did). The order is the permutation
  /// of the N samples drawn from (seed, epoch) with the Philox RNG (random.h), so it does not
  /// depend on thread timing, on prefetch or on where the epoch was started. May be called at
  /// any time, also mid-epoch: the prefetch thread of the previous epoch is stopped first.
  /// ValueError on a negative epoch or an out-of-range first_batch.
  void start_epoch(std::int64_t epoch, std::int64_t first_batch = 0) override;

  /// Replaces out with the next batch of the epoch and returns true, or returns false (out
  /// untouched) when the epoch is over. StateError before the first start_epoch; rethrows an
  /// error met while assembling the batch (see the class comment).
  bool next(Batch& out) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mixprec::data
