#pragma once
/// The communication layer of data-parallel training: the few collective operations ranks need
/// to agree on gradients, "found inf" flags and start-up configuration. Implementations:
/// SingleProcess (always) and an MPI one (when mixprec is built with MIXPREC_MPI), obtained from
/// dist::world(). Public headers never include mpi.h, so users of mixprec need no MPI headers.
#include <cstddef>
#include <string>

namespace mixprec::dist {

/// A group of ranks that run the same program and meet in collective operations. Every rank
/// must call the same collectives in the same order with the same sizes (as in MPI); a call
/// that fails (a peer died, the network broke) throws BackendError naming the rank and the
/// operation, never returns a wrong result. The methods are const: they change the data passed
/// in, not the communicator.
class Communicator {
 public:
  virtual ~Communicator() = default;

  /// This process's index in the group, 0 <= rank() < size(); rank 0 writes logs and checkpoints.
  virtual int rank() const = 0;
  /// The number of ranks in the group (1 for a single process).
  virtual int size() const = 0;

  /// Replaces data[0..n) on every rank by the element-wise f32 sum over ranks, added in rank
  /// order ((x0 + x1) + x2) + ..., so the result is bit-identical on every rank and from run to
  /// run, whatever the timing (MPI_Allreduce's order is implementation-defined; see
  /// docs/distributed.md). n must be equal on every rank; data may be null when n == 0.
  virtual void allreduce_sum(float* data, std::size_t n) const = 0;

  /// The maximum of value over all ranks, identical on every rank; NaN anywhere gives NaN. Used
  /// for "found inf" agreement, so that all ranks skip a step together.
  virtual double allreduce_max(double value) const = 0;

  /// Replaces value on every rank by root's value (any length, binary-safe); for configs and
  /// checksums. root must be in [0, size()), else ValueError.
  virtual void broadcast(std::string& value, int root) const = 0;

  /// Returns once every rank has called it.
  virtual void barrier() const = 0;

  /// A short name for logs, e.g. "single-process" or "mpi rank 1 of 3".
  virtual std::string name() const = 0;
};

}  // namespace mixprec::dist
