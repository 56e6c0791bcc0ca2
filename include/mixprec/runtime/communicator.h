#pragma once
/// The communication layer of data-parallel training: the few collective operations ranks need
/// to agree on gradients, "found inf" flags and start-up configuration. Implementations:
/// SingleProcess (always) and an MPI one (when mixprec is built with MIXPREC_MPI), obtained from
/// dist::world(). Public headers never include mpi.h, so users of mixprec need no MPI headers.
/// The interface lives on the runtime floor so that ops (the synchronised batch norm) and nn can
/// communicate through it; dist/ implements it and names it dist::Communicator too
/// (mixprec/dist/communicator.h).
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace mixprec::runtime {

/// A contiguous range [begin, begin + count) of a buffer: one rank's share of it.
struct Shard {
  std::size_t begin = 0;
  std::size_t count = 0;
  std::size_t end() const { return begin + count; }
};

/// Rank k's share of n elements split over p >= 1 ranks: the first n % p shares are one element
/// longer, so the shares tile [0, n) in rank order and differ in size by at most one.
inline Shard shard_of(std::size_t n, int p, int k) {
  const auto parts = static_cast<std::size_t>(p), idx = static_cast<std::size_t>(k);
  const std::size_t base = n / parts, extra = n % parts;
  return {idx * base + (idx < extra ? idx : extra), base + (idx < extra ? 1 : 0)};
}

/// The number format f32 values travel in. 16-bit formats halve the bytes on the network; values
/// are rounded to nearest even before sending and every sum is still accumulated in f32.
enum class WireDType { f32, bf16, f16 };
/// "fp32", "bf16", "fp16".
const char* name(WireDType wire);
/// Parses "fp32" | "bf16" | "fp16"; ValueError naming `flag` otherwise.
WireDType parse_wire_dtype(std::string_view text, const char* flag = "--wire-dtype");

/// A reduce-scatter in flight (Communicator::start_reduce_scatter_sum). Destroying one that was
/// not finished waits for its transfers first (buffers in use by MPI must outlive them).
class PendingReduction {
 public:
  virtual ~PendingReduction() = default;
  /// Lets the transfers advance without waiting: some transports move data only inside MPI
  /// calls, so a caller busy with other work (backward) calls this now and then. Cheap.
  virtual void progress() = 0;
  /// Waits for the transfers and writes this rank's sums (rank order, as reduce_scatter_sum).
  virtual void finish() = 0;
};

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
  /// Rank k's share of a buffer of n elements in reduce_scatter_sum and allgather: shard_of.
  Shard shard(std::size_t n, int k) const { return shard_of(n, size(), k); }
  /// This rank's share: shard(n, rank()).
  Shard my_shard(std::size_t n) const { return shard(n, rank()); }

  /// Reduce-scatter: afterwards data[my_shard(n)] holds the element-wise f32 sum over ranks,
  /// added in rank order ((x0 + x1) + x2) + ..., the same expression whichever rank computes it,
  /// so the result does not depend on timing or on MPI's algorithms (MPI_Reduce_scatter's order
  /// is implementation-defined; see docs/distributed.md). The rest of data is left unspecified.
  /// With a 16-bit wire every rank's values are rounded to it before they travel (the owner's
  /// own contribution too, so that every term of the sum is treated alike). n must be equal on
  /// every rank; data may be null when n == 0.
  virtual void reduce_scatter_sum(float* data, std::size_t n, WireDType wire = WireDType::f32) const = 0;

  /// Starts a reduce-scatter of data[range] only (range within [0, n)): each element travels to
  /// the rank whose share of n (shard(n, k)) holds it, and once finish() returns,
  /// data[range ∩ my_shard(n)] holds the rank-ordered sums, exactly as reduce_scatter_sum would
  /// leave them. Lets a caller reduce a buffer piece by piece as the pieces become ready (data
  /// parallelism's gradient buckets, during backward). data[range] must stay alive and unchanged
  /// until finish(); `tag` (0..30000) tells apart reductions in flight together and must be the
  /// same on every rank; every rank must start the same ranges (in any order).
  virtual std::unique_ptr<PendingReduction> start_reduce_scatter_sum(float* data, std::size_t n, Shard range,
                                                                     int tag, WireDType wire = WireDType::f32) const = 0;

  /// All-gather: afterwards every rank's data[shard(n, k)] holds rank k's data[shard(n, k)], for
  /// every k. With a 16-bit wire each owner first rounds its share in place, so all ranks end
  /// with the same bits.
  virtual void allgather(float* data, std::size_t n, WireDType wire = WireDType::f32) const = 0;

  /// All-reduce: reduce_scatter_sum then allgather. Replaces data[0..n) on every rank by the
  /// rank-ordered sum, bit-identical on every rank and from run to run.
  void allreduce_sum(float* data, std::size_t n, WireDType wire = WireDType::f32) const {
    reduce_scatter_sum(data, n, wire);
    allgather(data, n, wire);
  }

  /// The maximum of value over all ranks, identical on every rank; NaN anywhere gives NaN. Used
  /// for "found inf" agreement, so that all ranks skip a step together.
  virtual double allreduce_max(double value) const = 0;

  /// The sum of value over all ranks, added in rank order in double, identical on every rank
  /// (e.g. the squared gradient norms of a sharded optimizer's pieces).
  virtual double allreduce_sum(double value) const = 0;

  /// allreduce_sum and allreduce_max of each of values[0..n) (the same n on every rank),
  /// identical on every rank: for statistics gathered per rank and combined before a decision
  /// every rank must make alike. The default calls the scalar ones n times; MPI makes it one
  /// exchange.
  virtual void allreduce_sums(double* values, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) values[i] = allreduce_sum(values[i]);
  }
  virtual void allreduce_maxima(double* values, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) values[i] = allreduce_max(values[i]);
  }

  /// Replaces value on every rank by root's value (any length, binary-safe); for configs and
  /// checksums. root must be in [0, size()), else ValueError.
  virtual void broadcast(std::string& value, int root) const = 0;

  /// Returns once every rank has called it.
  virtual void barrier() const = 0;

  /// A short name for logs, e.g. "single-process" or "mpi rank 1 of 3".
  virtual std::string name() const = 0;
};

}  // namespace mixprec::runtime
