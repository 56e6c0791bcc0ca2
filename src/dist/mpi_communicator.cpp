// MpiCommunicator: deterministic collectives over MPI. MPI_Allreduce would be one call, but the
// MPI standard leaves its reduction order to the implementation (Open MPI picks an algorithm by
// message size and rank count, and float addition is not associative), so the f32 sum is built
// from a reduce-scatter and an all-gather whose arithmetic is ours and fixed: each element is
// summed by exactly one rank, in rank order, and that rank's bits are copied to everyone. The
// same two halves serve the sharded optimizer (ZeRO-1) on their own.
#if MIXPREC_HAVE_MPI

#include "dist/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/convert.h"
#include "mixprec/core/dtype.h"
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

namespace {

DType dtype_of(WireDType wire) {
  return wire == WireDType::bf16 ? DType::bf16 : wire == WireDType::f16 ? DType::f16 : DType::f32;
}

// The part of share s that round r moves: [s.begin + r * piece, ...), possibly empty.
Shard round_part(const Shard& s, std::size_t r, std::size_t piece) {
  const std::size_t first = std::min(s.count, r * piece);
  return {s.begin + first, std::min(piece, s.count - first)};
}

int as_int(std::size_t v) { return static_cast<int>(v); }

}  // namespace

std::size_t MpiCommunicator::piece() const {
  return std::max<std::size_t>(1, max_segment_ / static_cast<std::size_t>(size_));
}

void MpiCommunicator::reduce_scatter_sum(float* data, std::size_t n, WireDType wire) const {
  MIXPREC_CHECK(data != nullptr || n == 0, ValueError, "dist.reduce_scatter_sum",
                "data is null but n = " << n << "; pass a buffer of n floats (or n = 0)");
  const int p = size_;
  const std::size_t per = piece(), rounds = (shard(n, 0).count + per - 1) / per;
  const DType dt = dtype_of(wire);
  const std::size_t width = size_of(dt);
  // Displacements index data directly when they fit MPI's int; otherwise (and for a 16-bit
  // wire, which must convert anyway) each round's pieces are packed into a send buffer.
  const bool direct = wire == WireDType::f32 && n <= static_cast<std::size_t>(INT_MAX);
  std::vector<int> send_counts(p), send_displs(p), recv_counts(p), recv_displs(p);
  std::vector<unsigned char> packed, received;
  std::vector<float> widened;
  for (std::size_t r = 0; r < rounds; ++r) {
    const Shard mine = round_part(my_shard(n), r, per);
    std::size_t offset = 0;
    for (int k = 0; k < p; ++k) {
      const Shard part = round_part(shard(n, k), r, per);
      send_counts[k] = as_int(part.count);
      send_displs[k] = as_int(direct ? part.begin : offset);
      offset += part.count;
      // Rank k's copy of my piece lands at k * mine.count: the receive buffer is rank-ordered.
      recv_counts[k] = as_int(mine.count);
      recv_displs[k] = as_int(static_cast<std::size_t>(k) * mine.count);
    }
    const void* send = data;
    if (!direct) {
      packed.resize(offset * width);
      std::size_t at = 0;
      for (int k = 0; k < p; ++k) {
        const Shard part = round_part(shard(n, k), r, per);
        kernels::convert(data + part.begin, DType::f32, packed.data() + at * width, dt, part.count);
        at += part.count;
      }
      send = packed.data();
    }
    const MPI_Datatype type = wire == WireDType::f32 ? MPI_FLOAT : MPI_UINT16_T;
    received.resize(static_cast<std::size_t>(p) * mine.count * width);
    check(MPI_Alltoallv(send, send_counts.data(), send_displs.data(), type, received.data(),
                        recv_counts.data(), recv_displs.data(), type, comm_),
          "reduce_scatter_sum", "MPI_Alltoallv");
    const float* terms = reinterpret_cast<const float*>(received.data());
    if (wire != WireDType::f32) {
      widened.resize(static_cast<std::size_t>(p) * mine.count);
      kernels::convert(received.data(), dt, widened.data(), DType::f32, widened.size());
      terms = widened.data();
    }
    // The fixed order: ((x_0 + x_1) + x_2) + ..., plain f32 adds (-ffp-contract=off, no
    // reassociation), the same expression whichever rank owns the piece.
    float* out = data + mine.begin;
    for (std::size_t j = 0; j < mine.count; ++j) {
      float acc = terms[j];
      for (int k = 1; k < p; ++k) acc += terms[static_cast<std::size_t>(k) * mine.count + j];
      out[j] = acc;
    }
  }
}

void MpiCommunicator::allgather(float* data, std::size_t n, WireDType wire) const {
  MIXPREC_CHECK(data != nullptr || n == 0, ValueError, "dist.allgather",
                "data is null but n = " << n << "; pass a buffer of n floats (or n = 0)");
  const int p = size_;
  const std::size_t per = piece(), rounds = (shard(n, 0).count + per - 1) / per;
  const DType dt = dtype_of(wire);
  const std::size_t width = size_of(dt);
  const bool direct = wire == WireDType::f32 && n <= static_cast<std::size_t>(INT_MAX);
  std::vector<int> counts(p), displs(p);
  std::vector<unsigned char> gathered;
  for (std::size_t r = 0; r < rounds; ++r) {
    std::size_t offset = 0;
    for (int k = 0; k < p; ++k) {
      const Shard part = round_part(shard(n, k), r, per);
      counts[k] = as_int(part.count);
      displs[k] = as_int(direct ? part.begin : offset);
      offset += part.count;
    }
    if (direct) {
      check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), displs.data(),
                           MPI_FLOAT, comm_),
            "allgather", "MPI_Allgatherv");
      continue;
    }
    gathered.resize(offset * width);
    const Shard mine = round_part(my_shard(n), r, per);
    unsigned char* my_slot = gathered.data() + static_cast<std::size_t>(displs[rank_]) * width;
    kernels::convert(data + mine.begin, DType::f32, my_slot, dt, mine.count);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered.data(), counts.data(),
                         displs.data(), wire == WireDType::f32 ? MPI_FLOAT : MPI_UINT16_T, comm_),
          "allgather", "MPI_Allgatherv");
    // Every share, the owner's own included, becomes the value that travelled.
    for (int k = 0; k < p; ++k) {
      const Shard part = round_part(shard(n, k), r, per);
      kernels::convert(gathered.data() + static_cast<std::size_t>(displs[k]) * width, dt,
                       data + part.begin, DType::f32, part.count);
    }
  }
}

std::vector<double> MpiCommunicator::gather_values(double value, const char* op) const {
  std::vector<double> all(static_cast<std::size_t>(size_));
  check(MPI_Allgather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_), op, "MPI_Allgather");
  return all;
}

double MpiCommunicator::allreduce_max(double value) const {
  const std::vector<double> all = gather_values(value, "allreduce_max");
  double best = all[0];
  for (double v : all) {
    if (std::isnan(v)) return v;
    if (v > best) best = v;
  }
  return best;
}

double MpiCommunicator::allreduce_sum(double value) const {
  double sum = 0;
  for (double v : gather_values(value, "allreduce_sum")) sum += v;  // rank order
  return sum;
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
