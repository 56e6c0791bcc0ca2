#pragma once
/// The communicator of a job with one rank: every collective is the identity, so code written
/// for N ranks runs unchanged (and at no cost) in one process.
#include "mixprec/dist/communicator.h"

namespace mixprec::dist {

/// A group of one: rank 0 of size 1; every collective leaves the data as it is. Nothing
/// travels, so a 16-bit wire rounds nothing.
class SingleProcess final : public Communicator {
 public:
  /// Always 0.
  int rank() const override { return 0; }
  /// Always 1.
  int size() const override { return 1; }
  /// The sum over one rank is the data itself: nothing to do (ValueError for null data, n > 0).
  void reduce_scatter_sum(float* data, std::size_t n, WireDType wire = WireDType::f32) const override;
  /// Nothing travels: a pending reduction with nothing to do.
  std::unique_ptr<PendingReduction> start_reduce_scatter_sum(float* data, std::size_t n, Shard range, int tag,
                                                             WireDType wire = WireDType::f32) const override;
  /// One rank's share is the whole buffer: nothing to do (ValueError for null data, n > 0).
  void allgather(float* data, std::size_t n, WireDType wire = WireDType::f32) const override;
  /// The maximum over one rank is the value itself (NaN stays NaN).
  double allreduce_max(double value) const override { return value; }
  /// The sum over one rank is the value itself.
  double allreduce_sum(double value) const override { return value; }
  using Communicator::allreduce_sum;
  /// root must be 0 (ValueError otherwise); value is unchanged.
  void broadcast(std::string& value, int root) const override;
  /// Nothing to wait for.
  void barrier() const override {}
  /// "single-process".
  std::string name() const override { return "single-process"; }
};

}  // namespace mixprec::dist
