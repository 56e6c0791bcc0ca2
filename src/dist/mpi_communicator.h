#pragma once
// The MPI implementation of dist::Communicator. Private: it needs mpi.h, which public headers
// never include; users get it from dist::world(). Only compiled with MIXPREC_HAVE_MPI.
#include <mpi.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/dist/communicator.h"

namespace mixprec::dist {

/// Collectives over a private duplicate of an MPI communicator (so mixprec's messages never
/// match a user's), with MPI_ERRORS_RETURN so that a failed call throws BackendError naming the
/// rank and the operation instead of aborting inside MPI. MPI must be initialised.
class MpiCommunicator final : public Communicator {
 public:
  /// Elements moved per reduce-scatter or all-gather round, over all ranks' shares together:
  /// bounds the scratch buffers and keeps MPI's int counts far from overflow. 2^24 = 64 MiB of f32.
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
  /// start_reduce_scatter_sum over consecutive ranges of max_segment elements, each finished
  /// before the next starts.
  void reduce_scatter_sum(float* data, std::size_t n, WireDType wire = WireDType::f32) const override;
  /// Pairwise MPI_Isend/MPI_Irecv of the range's pieces (no copy to self), then in finish()
  /// each element summed by its owner in rank order: bit-identical on every rank and
  /// independent of timing.
  std::unique_ptr<PendingReduction> start_reduce_scatter_sum(float* data, std::size_t n, Shard range, int tag,
                                                             WireDType wire = WireDType::f32) const override;

  /// The buffers of one reduction tag, kept across calls (see below).
  struct Scratch {
    std::vector<unsigned char> received;             ///< one slot per rank: its copy of my piece
    std::vector<std::vector<unsigned char>> packed;  ///< 16-bit wire: per destination
    std::vector<float> widened;                      ///< 16-bit wire: the slots as f32
    bool in_use = false;
  };
  /// MPI_Allgatherv (in place for f32).
  void allgather(float* data, std::size_t n, WireDType wire = WireDType::f32) const override;
  using Communicator::allreduce_sum;
  /// MPI_Allgather of the values, then their sum in rank order.
  double allreduce_sum(double value) const override;
  /// MPI_Allgather of the values, then the max in rank order with NaN propagating (MPI_MAX's
  /// handling of NaN is unspecified).
  double allreduce_max(double value) const override;
  /// One MPI_Allgather of every rank's n values, then the sums (in rank order) or maxima (NaN
  /// propagating) element by element.
  void allreduce_sums(double* values, std::size_t n) const override;
  void allreduce_maxima(double* values, std::size_t n) const override;
  void broadcast(std::string& value, int root) const override;
  void barrier() const override;
  std::string name() const override;

 private:
  // Throws BackendError("dist.<op>", ...) when rc is not MPI_SUCCESS.
  void check(int rc, const char* op, const char* call) const;
  // Every rank's n values, rank after rank (n * size() values; MPI_Allgather).
  std::vector<double> gather_values(const double* values, std::size_t n, const char* op) const;
  // Elements of each rank's share moved per round: at least 1.
  std::size_t piece() const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::size_t max_segment_;
  // Scratch of the collectives, kept across calls: a step's gradients can be hundreds of MB,
  // and fresh buffers would be paid for in page faults every step. Only the thread that calls
  // MPI (MPI_THREAD_FUNNELED) uses them.
  mutable std::map<int, std::unique_ptr<Scratch>> scratch_;  // by tag
  mutable std::vector<unsigned char> gathered_;               // allgather, 16-bit wire
  friend class MpiPendingReduction;
};

}  // namespace mixprec::dist
