#pragma once
// The MPI implementation of dist::Communicator. Private: it needs mpi.h, which public headers
// never include; users get it from dist::world(). Only compiled with MIXPREC_HAVE_MPI.
#include <mpi.h>

#include <cstddef>
#include <string>

#include "mixprec/dist/communicator.h"

namespace mixprec::dist {

/// Collectives over a private duplicate of an MPI communicator (so mixprec's messages never
/// match a user's), with MPI_ERRORS_RETURN so that a failed call throws BackendError naming the
/// rank and the operation instead of aborting inside MPI. MPI must be initialised.
class MpiCommunicator final : public Communicator {
 public:
  /// Elements per all-reduce round: bounds the scratch buffer (p * n / p floats) and keeps MPI's
  /// int counts far from overflow. 2^24 floats = 64 MiB.
  static constexpr std::size_t kDefaultMaxSegment = std::size_t{1} << 24;

  /// Duplicates comm; max_segment (>= 1) is the number of elements reduced per round (smaller
  /// values only exercise the segmentation in tests: the result does not depend on it).
  explicit MpiCommunicator(MPI_Comm comm, std::size_t max_segment = kDefaultMaxSegment);
  /// Frees the duplicate, unless MPI has already been finalised.
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// Reduce-scatter by MPI_Alltoallv, each chunk summed by its owner in rank order, then
  /// MPI_Allgatherv: bit-identical on every rank and independent of timing.
  void allreduce_sum(float* data, std::size_t n) const override;
  /// MPI_Allgather of the values, then the max in rank order with NaN propagating (MPI_MAX's
  /// handling of NaN is unspecified).
  double allreduce_max(double value) const override;
  void broadcast(std::string& value, int root) const override;
  void barrier() const override;
  std::string name() const override;

 private:
  // Throws BackendError("dist.<op>", ...) when rc is not MPI_SUCCESS.
  void check(int rc, const char* op, const char* call) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::size_t max_segment_;
};

}  // namespace mixprec::dist
