// MpiCommunicator: deterministic collectives over MPI. MPI_Allreduce would be one call, but the
// MPI standard leaves its reduction order to the implementation (Open MPI picks an algorithm by
// message size and rank count, and float addition is not associative), so the f32 sum is built
// from a reduce-scatter and an all-gather whose arithmetic is ours and fixed: each element is
// summed by exactly one rank, in rank order, and that rank's bits are copied to everyone.
#if MIXPREC_HAVE_MPI

#include "dist/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dist/chunks.h"
#include "mixprec/core/error.h"

namespace mixprec::dist {

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::size_t max_segment)
    : max_segment_(max_segment) {
  MIXPREC_CHECK(max_segment >= 1 && max_segment <= static_cast<std::size_t>(INT_MAX),
                ValueError, "dist.MpiCommunicator",
                "max_segment " << max_segment << " is out of range; use 1.." << INT_MAX);
  int rc = MPI_Comm_dup(comm, &comm_);
  if (rc != MPI_SUCCESS) {
    comm_ = MPI_COMM_NULL;
    check(rc, "init", "MPI_Comm_dup");
  }
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "init", "MPI_Comm_set_errhandler");
  check(MPI_Comm_rank(comm_, &rank_), "init", "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "init", "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check(int rc, const char* op, const char* call) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  MIXPREC_CHECK(false, BackendError, (std::string("dist.") + op).c_str(),
                "rank " << rank_ << " of " << size_ << ": " << call << " failed ("
                        << std::string(text, static_cast<std::size_t>(len))
                        << "); a peer rank has probably died or the network failed: see the "
                           "other ranks' errors and mpirun's report");
}

void MpiCommunicator::allreduce_sum(float* data, std::size_t n) const {
  MIXPREC_CHECK(data != nullptr || n == 0, ValueError, "dist.allreduce_sum",
                "data is null but n = " << n << "; pass a buffer of n floats (or n = 0)");
  const int p = size_;
  std::vector<int> send_counts(p), send_displs(p), recv_counts(p), recv_displs(p);
  std::vector<int> chunk_counts(p), chunk_displs(p);
  std::vector<float> gathered;
  for (std::size_t offset = 0; offset < n; offset += max_segment_) {
    const std::size_t m = std::min(max_segment_, n - offset);
    float* seg = data + offset;
    const detail::Chunk mine = detail::chunk_of(m, p, rank_);
    for (int k = 0; k < p; ++k) {
      const detail::Chunk c = detail::chunk_of(m, p, k);
      send_counts[k] = chunk_counts[k] = static_cast<int>(c.count);
      send_displs[k] = chunk_displs[k] = static_cast<int>(c.begin);
      // Rank k's copy of my chunk lands at k * mine.count: the receive buffer is rank-ordered.
      recv_counts[k] = static_cast<int>(mine.count);
      recv_displs[k] = static_cast<int>(static_cast<std::size_t>(k) * mine.count);
    }
    gathered.resize(static_cast<std::size_t>(p) * mine.count);
    check(MPI_Alltoallv(seg, send_counts.data(), send_displs.data(), MPI_FLOAT, gathered.data(),
                        recv_counts.data(), recv_displs.data(), MPI_FLOAT, comm_),
          "allreduce_sum", "MPI_Alltoallv");
    // The fixed order: ((x_0 + x_1) + x_2) + ..., plain f32 adds (-ffp-contract=off, no
    // reassociation), the same expression whichever rank owns the chunk.
    float* out = seg + mine.begin;
    for (std::size_t j = 0; j < mine.count; ++j) {
      float acc = gathered[j];
      for (int k = 1; k < p; ++k) acc += gathered[static_cast<std::size_t>(k) * mine.count + j];
      out[j] = acc;
    }
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, seg, chunk_counts.data(),
                         chunk_displs.data(), MPI_FLOAT, comm_),
          "allreduce_sum", "MPI_Allgatherv");
  }
}

double MpiCommunicator::allreduce_max(double value) const {
  std::vector<double> all(static_cast<std::size_t>(size_));
  check(MPI_Allgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_), "allreduce_max",
        "MPI_Allgather");
  double best = all[0];
  for (double v : all) {
    if (std::isnan(v)) return v;
    if (v > best) best = v;
  }
  return best;
}

void MpiCommunicator::broadcast(std::string& value, int root) const {
  MIXPREC_CHECK(root >= 0 && root < size_, ValueError, "dist.broadcast",
                "root " << root << " is not a rank of this group of " << size_
                        << "; use 0.." << size_ - 1);
  std::uint64_t length = value.size();
  check(MPI_Bcast(&length, 1, MPI_UINT64_T, root, comm_), "broadcast", "MPI_Bcast");
  if (rank_ != root) value.resize(static_cast<std::size_t>(length));
  constexpr std::size_t kPiece = std::size_t{1} << 30;  // MPI counts are int
  for (std::size_t off = 0; off < value.size(); off += kPiece) {
    const int count = static_cast<int>(std::min(kPiece, value.size() - off));
    check(MPI_Bcast(value.data() + off, count, MPI_CHAR, root, comm_), "broadcast", "MPI_Bcast");
  }
}

void MpiCommunicator::barrier() const {
  check(MPI_Barrier(comm_), "barrier", "MPI_Barrier");
}

std::string MpiCommunicator::name() const {
  return "mpi rank " + std::to_string(rank_) + " of " + std::to_string(size_);
}

}  // namespace mixprec::dist

#endif  // MIXPREC_HAVE_MPI
