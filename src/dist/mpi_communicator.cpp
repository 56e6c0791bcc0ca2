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
#include <cstring>
#include <vector>

#include "kernels/backend.h"
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

constexpr int kTag = 7;

}  // namespace

std::size_t MpiCommunicator::piece() const {
  return std::max<std::size_t>(1, max_segment_ / static_cast<std::size_t>(size_));
}

// A reduce-scatter of one range in flight: the pairwise Isend/Irecv of its pieces (no copy to
// self), then, in finish(), each element of this rank's piece summed in rank order.
class MpiPendingReduction final : public PendingReduction {
 public:
  MpiPendingReduction(const MpiCommunicator& comm, MpiCommunicator::Scratch& scratch, float* data,
                      std::size_t n, Shard range, int tag, WireDType wire)
      : comm_(comm), scratch_(scratch), data_(data), wire_(wire) {
    const int p = comm.size(), me = comm.rank();
    const DType dt = dtype_of(wire);
    const std::size_t width = size_of(dt);
    const MPI_Datatype type = wire == WireDType::f32 ? MPI_FLOAT : MPI_UINT16_T;
    mine_ = intersect(range, comm.my_shard(n));
    scratch_.in_use = true;
    scratch_.received.resize(static_cast<std::size_t>(p) * mine_.count * width);
    scratch_.packed.resize(static_cast<std::size_t>(p));
    requests_.reserve(2 * static_cast<std::size_t>(p));
    // Receives first, then sends, in the pairwise order (rank + s, rank - s) that spreads the
    // traffic; messages are matched by (source, tag), so the posting order does not matter.
    for (int step = 1; step < p; ++step) {
      const int from = (me - step + p) % p;
      if (mine_.count == 0) break;
      requests_.push_back(MPI_REQUEST_NULL);
      comm.check(MPI_Irecv(slot(from), as_int(mine_.count), type, from, tag, comm.comm_, &requests_.back()),
                 "reduce_scatter_sum", "MPI_Irecv");
    }
    for (int step = 1; step < p; ++step) {
      const int to = (me + step) % p;
      const Shard theirs = intersect(range, comm.shard(n, to));
      if (theirs.count == 0) continue;
      const void* send = data + theirs.begin;
      if (wire != WireDType::f32) {
        std::vector<unsigned char>& packed = scratch_.packed[static_cast<std::size_t>(to)];
        packed.resize(theirs.count * width);
        kernels::host_backend().convert(data + theirs.begin, DType::f32, packed.data(), dt, theirs.count);
        send = packed.data();
      }
      requests_.push_back(MPI_REQUEST_NULL);
      comm.check(MPI_Isend(send, as_int(theirs.count), type, to, tag, comm.comm_, &requests_.back()),
                 "reduce_scatter_sum", "MPI_Isend");
    }
  }

  ~MpiPendingReduction() override {
    if (!done_) {
      // Unwinding (an exception elsewhere): MPI may still be using the buffers.
      MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    }
    scratch_.in_use = false;
  }

  void progress() override {
    if (done_ || requests_.empty()) return;
    int flag = 0;
    comm_.check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE),
                "reduce_scatter_sum", "MPI_Testall");
  }

  void finish() override {
    if (done_) return;
    comm_.check(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
                "reduce_scatter_sum", "MPI_Waitall");
    done_ = true;
    if (mine_.count == 0) return;
    const int p = comm_.size(), me = comm_.rank();
    const DType dt = dtype_of(wire_);
    std::vector<const float*> terms(static_cast<std::size_t>(p));
    // Every term as f32. With two ranks and an f32 wire this rank's own term is read in place
    // (the sum below writes element j only after reading it); otherwise it joins the scratch,
    // rounded like the travelling terms on a 16-bit wire.
    float* out = data_ + mine_.begin;
    if (wire_ != WireDType::f32) {
      kernels::host_backend().convert(out, DType::f32, slot(me), dt, mine_.count);
      scratch_.widened.resize(static_cast<std::size_t>(p) * mine_.count);
      kernels::host_backend().convert(scratch_.received.data(), dt, scratch_.widened.data(), DType::f32, scratch_.widened.size());
      for (int k = 0; k < p; ++k) terms[static_cast<std::size_t>(k)] = scratch_.widened.data() + static_cast<std::size_t>(k) * mine_.count;
    } else {
      for (int k = 0; k < p; ++k) terms[static_cast<std::size_t>(k)] = reinterpret_cast<const float*>(slot(k));
      if (p == 2) {
        terms[static_cast<std::size_t>(me)] = out;
      } else {
        std::memcpy(slot(me), out, mine_.count * sizeof(float));
      }
    }
    // The fixed order: ((x_0 + x_1) + x_2) + ..., plain f32 adds (-ffp-contract=off, no
    // reassociation), the same expression whichever rank owns the piece; one pass per term.
    const float* t0 = terms[0];
    const float* t1 = terms[1];
    for (std::size_t j = 0; j < mine_.count; ++j) out[j] = t0[j] + t1[j];
    for (int k = 2; k < p; ++k) {
      const float* tk = terms[static_cast<std::size_t>(k)];
      for (std::size_t j = 0; j < mine_.count; ++j) out[j] += tk[j];
    }
  }

 private:
  static Shard intersect(Shard a, Shard b) {
    const std::size_t lo = std::max(a.begin, b.begin), hi = std::min(a.end(), b.end());
    return lo < hi ? Shard{lo, hi - lo} : Shard{lo, 0};
  }
  unsigned char* slot(int k) {
    return scratch_.received.data() + static_cast<std::size_t>(k) * mine_.count * size_of(dtype_of(wire_));
  }

  const MpiCommunicator& comm_;
  MpiCommunicator::Scratch& scratch_;
  float* data_;
  WireDType wire_;
  Shard mine_;
  std::vector<MPI_Request> requests_;
  bool done_ = false;
};

std::unique_ptr<PendingReduction> MpiCommunicator::start_reduce_scatter_sum(float* data, std::size_t n, Shard range,
                                                                            int tag, WireDType wire) const {
  MIXPREC_CHECK((data != nullptr || n == 0) && range.end() <= n && range.count <= static_cast<std::size_t>(INT_MAX),
                ValueError, "dist.start_reduce_scatter_sum",
                "needs a buffer of n = " << n << " floats and a range of at most " << INT_MAX
                                         << " elements inside it, got [" << range.begin << ", " << range.end() << ")");
  MIXPREC_CHECK(tag >= 0 && tag <= 30000, ValueError, "dist.start_reduce_scatter_sum",
                "tag " << tag << " is out of range; use 0..30000");
  std::unique_ptr<Scratch>& scratch = scratch_[tag];
  if (!scratch) scratch = std::make_unique<Scratch>();
  MIXPREC_CHECK(!scratch->in_use, StateError, "dist.start_reduce_scatter_sum",
                "a reduction with tag " << tag << " is still in flight; finish it first or use another tag");
  return std::make_unique<MpiPendingReduction>(*this, *scratch, data, n, range, tag, wire);
}

void MpiCommunicator::reduce_scatter_sum(float* data, std::size_t n, WireDType wire) const {
  MIXPREC_CHECK(data != nullptr || n == 0, ValueError, "dist.reduce_scatter_sum",
                "data is null but n = " << n << "; pass a buffer of n floats (or n = 0)");
  // Ranges of max_segment elements, one after the other: bounded scratch, int-sized counts.
  for (std::size_t begin = 0; begin < n; begin += max_segment_) {
    start_reduce_scatter_sum(data, n, Shard{begin, std::min(max_segment_, n - begin)}, 0, wire)->finish();
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
    std::vector<unsigned char>& gathered = gathered_;
    gathered.resize(offset * width);
    const Shard mine = round_part(my_shard(n), r, per);
    unsigned char* my_slot = gathered.data() + static_cast<std::size_t>(displs[rank_]) * width;
    kernels::host_backend().convert(data + mine.begin, DType::f32, my_slot, dt, mine.count);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered.data(), counts.data(),
                         displs.data(), wire == WireDType::f32 ? MPI_FLOAT : MPI_UINT16_T, comm_),
          "allgather", "MPI_Allgatherv");
    // Every share, the owner's own included, becomes the value that travelled.
    for (int k = 0; k < p; ++k) {
      const Shard part = round_part(shard(n, k), r, per);
      kernels::host_backend().convert(gathered.data() + static_cast<std::size_t>(displs[k]) * width, dt,
                       data + part.begin, DType::f32, part.count);
    }
  }
}

std::vector<double> MpiCommunicator::gather_values(const double* values, std::size_t n, const char* op) const {
  MIXPREC_CHECK(n <= static_cast<std::size_t>(INT_MAX), ValueError, (std::string("dist.") + op).c_str(),
                n << " values exceed MPI's int count; combine fewer at a time");
  std::vector<double> all(n * static_cast<std::size_t>(size_));
  if (n == 0) return all;
  check(MPI_Allgather(values, static_cast<int>(n), MPI_DOUBLE, all.data(), static_cast<int>(n), MPI_DOUBLE, comm_),
        op, "MPI_Allgather");
  return all;
}

void MpiCommunicator::allreduce_maxima(double* values, std::size_t n) const {
  const std::vector<double> all = gather_values(values, n, "allreduce_max");
  for (std::size_t i = 0; i < n; ++i) {
    double best = all[i];
    for (int k = 1; k < size_ && !std::isnan(best); ++k) {
      const double v = all[static_cast<std::size_t>(k) * n + i];
      if (std::isnan(v) || v > best) best = v;
    }
    values[i] = best;
  }
}

void MpiCommunicator::allreduce_sums(double* values, std::size_t n) const {
  const std::vector<double> all = gather_values(values, n, "allreduce_sum");
  for (std::size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int k = 0; k < size_; ++k) sum += all[static_cast<std::size_t>(k) * n + i];  // rank order
    values[i] = sum;
  }
}

double MpiCommunicator::allreduce_max(double value) const {
  allreduce_maxima(&value, 1);
  return value;
}

double MpiCommunicator::allreduce_sum(double value) const {
  allreduce_sums(&value, 1);
  return value;
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
