// mixprec_dist_check: the MPI communicator's checks, run by tests/dist/*.sh under
// `mpirun -np N`. Every rank runs every check; the job fails if any rank saw a failure.
//   mixprec_dist_check check N   all collectives on N ranks (exit 0 when all pass)
//   mixprec_dist_check die-exit  the last rank calls std::exit(3) while the others wait in
//                                allreduce_sum: mpirun must end the job, not hang
//   mixprec_dist_check die-kill  the same, with SIGKILL
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist/mpi_communicator.h"
#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/data_parallel.h"
#include "mixprec/dist/sharded_parameters.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/dist/world.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/train_step.h"

namespace {

using mixprec::dist::Communicator;

int failures = 0;

void expect(bool ok, const Communicator& comm, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "FAIL [%s] %s\n", comm.name().c_str(), what.c_str());
}

// Rank r's input for element i: one rank holds 1e8 and the others small values, so the f32 sum
// depends on the order of addition once there are three or more ranks.
float input(int r, std::size_t i, int p) {
  if (static_cast<std::size_t>(r) == i % static_cast<std::size_t>(p)) return 1e8f;
  return static_cast<float>(1 + (i * 31 + static_cast<std::size_t>(r) * 17) % 13) * 0.75f;
}

void check_allreduce_sum(const Communicator& comm, std::size_t n, const char* label) {
  const int p = comm.size();
  std::vector<float> data(n), forward(n), backward(n);
  for (std::size_t i = 0; i < n; ++i) {
    data[i] = input(comm.rank(), i, p);
    float f = input(0, i, p);
    for (int r = 1; r < p; ++r) f += input(r, i, p);
    float b = input(p - 1, i, p);
    for (int r = p - 2; r >= 0; --r) b += input(r, i, p);
    forward[i] = f;
    backward[i] = b;
  }
  comm.allreduce_sum(data.data(), n);
  const std::string tag = std::string(label) + " n=" + std::to_string(n);
  // memcmp of empty vectors would get null pointers (undefined even for n = 0).
  expect(n == 0 || std::memcmp(data.data(), forward.data(), n * sizeof(float)) == 0, comm,
         tag + ": allreduce_sum differs from the rank-ordered sum");
  // Bit-identical everywhere: compare the bytes with rank 0's.
  std::string bytes(reinterpret_cast<const char*>(data.data()), n * sizeof(float));
  std::string reference = bytes;
  comm.broadcast(reference, 0);
  expect(reference == bytes, comm, tag + ": result differs from rank 0's");
  if (p >= 3 && n >= 100) {
    std::size_t order_sensitive = 0;
    for (std::size_t i = 0; i < n; ++i) order_sensitive += forward[i] != backward[i];
    expect(order_sensitive > 0, comm, tag + ": the inputs do not depend on the summation order");
  }
}

// reduce_scatter_sum alone: this rank's share holds the rank-ordered sum (the rest is not
// looked at); allgather alone: every share arrives everywhere; a 16-bit wire: every term rounded
// to the wire's format before the f32 sum, and the gathered sums rounded too, identical on all.
void check_halves_and_wires(const Communicator& comm, std::size_t n, const char* label) {
  using mixprec::DType;
  using mixprec::dist::WireDType;
  const int p = comm.size();
  const std::string tag = std::string(label) + " n=" + std::to_string(n);
  const mixprec::dist::Shard mine = comm.my_shard(n);
  std::vector<float> data(n);
  for (std::size_t i = 0; i < n; ++i) data[i] = input(comm.rank(), i, p);
  comm.reduce_scatter_sum(data.data(), n);
  bool ok = true;
  for (std::size_t i = mine.begin; i < mine.end(); ++i) {
    float f = input(0, i, p);
    for (int r = 1; r < p; ++r) f += input(r, i, p);
    ok = ok && std::memcmp(&f, &data[i], sizeof f) == 0;
  }
  expect(ok, comm, tag + ": reduce_scatter_sum's share differs from the rank-ordered sum");

  std::vector<float> owned(n, -1.0f);
  for (std::size_t i = mine.begin; i < mine.end(); ++i) owned[i] = static_cast<float>(i) + 0.5f;
  comm.allgather(owned.data(), n);
  ok = true;
  for (std::size_t i = 0; i < n; ++i) ok = ok && owned[i] == static_cast<float>(i) + 0.5f;
  expect(ok, comm, tag + ": allgather did not deliver every rank's share");

  for (const auto& [wire, dtype] : {std::pair{WireDType::bf16, DType::bf16}, std::pair{WireDType::f16, DType::f16}}) {
    const auto round = [dtype = dtype](float x) { return mixprec::Tensor::full({1}, x).to(dtype).to(DType::f32).to_vector()[0]; };
    std::vector<float> w(n), want(n);
    for (std::size_t i = 0; i < n; ++i) {
      // Small values (f16 would overflow at 1e8): k/3 is exact in neither 16-bit format.
      const auto term = [&](int r) { return static_cast<float>(1 + (i * 7 + static_cast<std::size_t>(r) * 5) % 11) / 3.0f; };
      w[i] = term(comm.rank());
      float f = round(term(0));
      for (int r = 1; r < p; ++r) f += round(term(r));
      want[i] = round(f);
    }
    comm.allreduce_sum(w.data(), n, wire);
    expect(n == 0 || std::memcmp(w.data(), want.data(), n * sizeof(float)) == 0, comm,
           tag + " wire " + mixprec::dist::name(wire) + ": differs from the rounded rank-ordered sum");
    std::string bytes(reinterpret_cast<const char*>(w.data()), n * sizeof(float)), reference = bytes;
    comm.broadcast(reference, 0);
    expect(reference == bytes, comm, tag + " wire " + mixprec::dist::name(wire) + ": differs from rank 0's");
  }
}

// GradientSync over a real backward: with 4-byte buckets (one per parameter), arm() before the
// backward makes every bucket leave during it, and the averaged gradients equal the mean of the
// ranks' gradients bit for bit, the same as without arm() (everything sent by average()); in
// sharded mode the pieces' gradients are those means too.
void check_gradient_sync(const Communicator& comm) {
  using mixprec::Tensor;
  const int p = comm.size();
  const auto make_params = [] {
    std::vector<Tensor> params;
    std::uint64_t seed = 1;
    for (const mixprec::Shape& shape : {mixprec::Shape{4, 5}, mixprec::Shape{4}, mixprec::Shape{3, 4}, mixprec::Shape{3}}) {
      params.push_back(Tensor::randn(shape, seed++));
      params.back().set_requires_grad(true);
    }
    return params;
  };
  // loss = sum_i sum(p_i * p_i * c_rank): gradient 2 c_rank p_i, different on every rank.
  const auto backward = [&](const std::vector<Tensor>& params, float c) {
    Tensor loss;
    for (const Tensor& t : params) {
      const Tensor term = mixprec::sum(t * t * c);
      loss = loss.defined() ? loss + term : term;
    }
    loss.backward();
  };
  const auto expected = [&](const Tensor& param) {
    const std::vector<float> v = param.to_vector();
    std::vector<float> out(v.size());
    for (std::size_t j = 0; j < v.size(); ++j) {
      float acc = 2.0f * 1.0f * v[j];
      for (int k = 1; k < p; ++k) acc += 2.0f * static_cast<float>(k + 1) * v[j];
      out[j] = acc * (1.0f / static_cast<float>(p));
    }
    return out;
  };
  const float c = static_cast<float>(comm.rank() + 1);
  for (const bool early : {true, false}) {
    std::vector<Tensor> params = make_params();
    mixprec::dist::GradientSync sync(comm, params, mixprec::dist::WireDType::f32, nullptr, 4);
    expect(sync.bucket_count() >= 3, comm, "4-byte buckets: expected one bucket per parameter");
    if (early) sync.arm();
    backward(params, c);
    sync.average();
    const std::string tag = early ? "armed" : "not armed";
    expect(early ? sync.buckets_sent_early() == sync.bucket_count() : sync.buckets_sent_early() == 0, comm,
           tag + ": " + std::to_string(sync.buckets_sent_early()) + " of " + std::to_string(sync.bucket_count()) +
               " buckets sent during backward");
    for (std::size_t i = 0; i < params.size(); ++i) {
      expect(params[i].grad().to_vector() == expected(params[i]), comm,
             tag + ": parameter " + std::to_string(i) + "'s gradient is not the mean over the ranks");
    }
  }
  std::vector<Tensor> params = make_params();
  const mixprec::dist::ShardedParameters shards(comm, params);
  mixprec::dist::GradientSync sync(comm, params, mixprec::dist::WireDType::f32, &shards, 4);
  sync.arm();
  backward(params, c);
  sync.average();
  bool ok = true;
  for (const mixprec::dist::ParameterPiece& piece : shards.pieces()) {
    const std::vector<float> want = expected(params[piece.param]);
    const std::vector<float> got = piece.view.grad().to_vector();
    ok = ok && std::equal(got.begin(), got.end(), want.begin() + static_cast<std::ptrdiff_t>(piece.begin));
  }
  expect(ok && !shards.pieces().empty(), comm, "sharded: a piece's gradient is not the mean over the ranks");
}

// agree_or_throw / agree: no failure passes on every rank; failures on some ranks make every rank
// throw the same AgreedError naming the lowest failing rank, its message and how many others failed.
void check_agreement(const Communicator& comm) {
  const int p = comm.size();
  const int r = comm.rank();
  using mixprec::dist::AgreedError;
  // The message every rank caught, and whether it equals rank 0's.
  const auto same_as_rank0 = [&](const std::string& m) {
    std::string reference = m;
    comm.broadcast(reference, 0);
    return reference == m;
  };

  bool threw = false;
  try {
    mixprec::dist::agree_or_throw(comm, "nothing", "");
    mixprec::dist::agree(comm, "nothing either", [] {});
  } catch (const std::exception& e) {
    threw = true;
    std::fprintf(stderr, "[%s] unexpected: %s\n", comm.name().c_str(), e.what());
  }
  expect(!threw, comm, "agree_or_throw/agree refused when no rank failed");

  // The last rank fails (and, with 3+ ranks, rank 1 too): every rank names rank 1 (or the last).
  const int first = p >= 3 ? 1 : p - 1;
  const bool fails = r == p - 1 || (p >= 3 && r == 1);
  std::string message;
  int failed_rank = -1;
  try {
    mixprec::dist::agree_or_throw(comm, "loading a file",
                                  fails ? "file of rank " + std::to_string(r) + " missing" : "");
  } catch (const AgreedError& e) {
    message = e.what();
    failed_rank = e.failed_rank();
  }
  const std::string others = p >= 3 ? " (and on 1 other rank)" : "";
  const std::string want = "dist.agree: loading a file failed on rank " + std::to_string(first) + " of " +
                           std::to_string(p) + others + ": file of rank " + std::to_string(first) + " missing";
  expect(message == want && failed_rank == first, comm,
         "agree_or_throw message '" + message + "', wanted '" + want + "'");
  expect(same_as_rank0(message), comm, "agree_or_throw: ranks threw different messages");

  // agree: an exception thrown on the last rank only reaches every rank as an AgreedError.
  message.clear();
  try {
    mixprec::dist::agree(comm, "reading a checkpoint",
                         [&] { MIXPREC_CHECK(r != p - 1, mixprec::StateError, "load", "damaged on this node"); });
  } catch (const AgreedError& e) {
    message = e.what();
  }
  expect(message == "dist.agree: reading a checkpoint failed on rank " + std::to_string(p - 1) + " of " +
                        std::to_string(p) + ": load: damaged on this node",
         comm, "agree message '" + message + "'");

  // Every rank fails: rank 0's message, "and on every other rank".
  message.clear();
  try {
    mixprec::dist::agree(comm, "setting up", [&] { throw std::runtime_error("no " + std::to_string(r)); });
  } catch (const AgreedError& e) {
    message = e.what();
  }
  expect(
      message == "dist.agree: setting up failed on rank 0 of " + std::to_string(p) + " (and on every other rank): no 0",
      comm, "agree message when every rank fails: '" + message + "'");
  if (r == 0) std::printf("rank 0: %s\n", want.c_str());
}

// allreduce_sums / allreduce_maxima: element by element, rank-ordered sums, NaN propagating.
void check_vector_reductions(const Communicator& comm) {
  const int p = comm.size();
  const int r = comm.rank();
  comm.allreduce_sums(nullptr, 0);
  // Element 1: 1e16 on rank 0 and 1 elsewhere, whose double sum depends on the order.
  std::vector<double> sums = {0.1 * (r + 1), r == 0 ? 1e16 : 1.0, static_cast<double>(r), -1.0};
  comm.allreduce_sums(sums.data(), sums.size());
  double a = 0, b = 0, c = 0;
  for (int k = 0; k < p; ++k) {
    a += 0.1 * (k + 1);
    b += k == 0 ? 1e16 : 1.0;
    c += k;
  }
  expect(sums[0] == a && sums[1] == b && sums[2] == c && sums[3] == -p, comm,
         "allreduce_sums is not the element-wise rank-ordered sum");
  std::vector<double> maxima = {1.5 * r, r == p - 1 ? std::nan("") : 1.0, -std::numeric_limits<double>::infinity(),
                                r == 1 ? std::numeric_limits<double>::infinity() : 0.0};
  comm.allreduce_maxima(maxima.data(), maxima.size());
  expect(maxima[0] == 1.5 * (p - 1) && std::isnan(maxima[1]) && maxima[2] == -std::numeric_limits<double>::infinity() &&
             maxima[3] == std::numeric_limits<double>::infinity(),
         comm, "allreduce_maxima is not the element-wise maximum with NaN propagating");
}

// --precision auto-layer with several ranks: only the last rank's inputs are large enough to
// overflow the first Linear layer in fp16, yet every rank moves that layer to bf16 after step 0
// with the same reason, because the statistics are combined before the rules run.
void check_autopilot(const Communicator& comm) {
  using namespace mixprec;
  auto model = nn::sequential({std::make_shared<nn::Linear>(32, 64, true, 1), std::make_shared<nn::LayerNorm>(64),
                               std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(64, 10, true, 2)});
  train::TrainStep step(*model, train::StepConfig{.precision = "auto-layer", .compute = "fp16"}, &comm);
  const bool loud = comm.rank() == comm.size() - 1;
  const Tensor x = Tensor::randn({16, 32}, 5 + static_cast<std::uint64_t>(comm.rank())) * (loud ? 3e4f : 1.0f);
  std::vector<std::int64_t> y(16);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>((i * 7) % 10);
  for (int i = 0; i < 3; ++i) step.run([&] { return cross_entropy((*model)(x), y); });
  const auto& moves = step.autopilot()->moves();
  expect(moves.size() == 1 && moves[0].step == 0 && moves[0].layer == "0" && moves[0].to == DType::bf16, comm,
         "auto-layer with several ranks: expected one move of layer 0 to bf16 after step 0 on every rank, got " +
             std::to_string(moves.size()) + " moves");
  std::string reason = moves.empty() ? "" : moves[0].reason;
  std::string reference = reason;
  comm.broadcast(reference, 0);
  expect(reason == reference, comm, "auto-layer: the ranks moved for different reasons: '" + reason + "'");
  if (comm.rank() == 0) std::printf("rank 0: autopilot move: %s\n", reason.c_str());
}

void check_all(const Communicator& comm, int expected_size) {
  const int p = comm.size();
  const int r = comm.rank();
  expect(p == expected_size, comm, "size " + std::to_string(p) + ", expected " + std::to_string(expected_size));
  expect(comm.name() == "mpi rank " + std::to_string(r) + " of " + std::to_string(p), comm,
         "name is '" + comm.name() + "'");

  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{7},
                        std::size_t{1001}, std::size_t{100003}})
    check_allreduce_sum(comm, n, "world");
  for (std::size_t n : {std::size_t{0}, std::size_t{2}, std::size_t{1001}}) check_halves_and_wires(comm, n, "world");
  // Rounds of 7 elements: the segmentation must not change a bit.
  {
    mixprec::dist::MpiCommunicator small(MPI_COMM_WORLD, 7);
    check_allreduce_sum(small, 1001, "segment=7");
    check_allreduce_sum(small, 5, "segment=7");
    check_halves_and_wires(small, 1001, "segment=7");
  }
  expect(comm.allreduce_sum(0.1 * (r + 1)) == [p] { double s = 0; for (int k = 0; k < p; ++k) s += 0.1 * (k + 1); return s; }(),
         comm, "allreduce_sum of a double is not the rank-ordered sum");

  check_gradient_sync(comm);
  expect(comm.allreduce_max(1.5 * r) == 1.5 * (p - 1), comm, "allreduce_max of 1.5 * rank");
  expect(comm.allreduce_max(r == 0 ? -std::numeric_limits<double>::infinity() : -1.0) == -1.0,
         comm, "allreduce_max with -inf on rank 0");
  expect(std::isnan(comm.allreduce_max(r == p - 1 ? std::nan("") : 1.0 * r)), comm,
         "allreduce_max with NaN on the last rank is not NaN");
  expect(comm.allreduce_max(r == 1 ? std::numeric_limits<double>::infinity() : 0.0) ==
             std::numeric_limits<double>::infinity(),
         comm, "allreduce_max with +inf on rank 1 (found-inf agreement)");

  std::string root_value = std::string("config from the last rank\0with a NUL", 37) + std::string(5000, 'x');
  std::string s = r == p - 1 ? root_value : "rank " + std::to_string(r);
  comm.broadcast(s, p - 1);
  expect(s == root_value, comm, "broadcast from the last rank");
  std::string empty = r == 0 ? "" : "not empty";
  comm.broadcast(empty, 0);
  expect(empty.empty(), comm, "broadcast of an empty string");
  bool refused = false;
  try {
    std::string x;
    comm.broadcast(x, p);
  } catch (const mixprec::ValueError&) {
    refused = true;
  }
  expect(refused, comm, "broadcast with root == size is not refused");

  bool threw = false;
  try {
    mixprec::dist::check_same_everywhere(comm, "config hash", "abc123");
  } catch (const mixprec::Error& e) {
    threw = true;
    std::fprintf(stderr, "[%s] unexpected: %s\n", comm.name().c_str(), e.what());
  }
  expect(!threw, comm, "check_same_everywhere refused equal values");
  // The last rank (and, with 3+ ranks, also rank 1) was started differently: every rank must
  // throw, naming the first differing rank.
  const int first_bad = p >= 3 ? 1 : p - 1;
  const bool bad = r == p - 1 || (p >= 3 && r == 1);
  std::string message;
  try {
    mixprec::dist::check_same_everywhere(comm, "build id", bad ? "build-B" : "build-A");
  } catch (const mixprec::ValueError& e) {
    message = e.what();
  }
  expect(message.find("build id differs between ranks") != std::string::npos &&
             message.find("rank " + std::to_string(first_bad) + " has 'build-B'") != std::string::npos &&
             message.find("rank 0 has 'build-A'") != std::string::npos,
         comm, "check_same_everywhere message: '" + message + "'");
  if (r == 0) std::printf("rank 0: %s\n", message.c_str());

  check_agreement(comm);
  check_vector_reductions(comm);
  check_autopilot(comm);
  comm.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  try {
    const Communicator& comm = mixprec::dist::world();
    if (mode == "check") {
      const int expected = argc > 2 ? std::atoi(argv[2]) : comm.size();
      check_all(comm, expected);
      // Every rank exits with the same status.
      const double worst = comm.allreduce_max(failures);
      if (comm.rank() == 0)
        std::printf("dist_check: %s on %d ranks (%s)\n", worst == 0 ? "all passed" : "FAILED",
                    comm.size(), mixprec::dist::mpi_library_version().c_str());
      return worst == 0 ? 0 : 1;
    }
    if (mode == "die-exit" || mode == "die-kill") {
      comm.barrier();
      const int victim = comm.size() - 1;
      if (comm.rank() == victim) {
        std::fprintf(stderr, "rank %d: dying (%s)\n", victim, mode.c_str());
        std::fflush(stderr);
        if (mode == "die-exit") std::exit(3);
        std::raise(SIGKILL);
      }
      // The survivors wait in a collective the victim never joins.
      std::vector<float> data(1000, 1.0f);
      for (;;) comm.allreduce_sum(data.data(), data.size());
    }
    std::fprintf(stderr, "mixprec_dist_check: unknown mode '%s' (check|die-exit|die-kill)\n",
                 mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mixprec_dist_check: %s\n", e.what());
    mixprec::dist::abort_job(4);
  }
}
