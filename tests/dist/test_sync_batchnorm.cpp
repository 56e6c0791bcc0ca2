// Synchronised batch norm (ops::sync_batch_norm, nn::BatchNormBase::set_sync): the moment
// combination and the exact double exchange on their own, then 2 and 3 ranks simulated by
// threads (tests/dist/thread_group.h) against one batch_norm over the concatenated batch:
// outputs, input gradients, the sum of the ranks' parameter gradients and the running
// statistics; one rank is plain batch_norm bit for bit. The same through mpirun:
// tests/dist/sync_batchnorm.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend_scope.h"
#include "ops/sync_batchnorm_detail.h"
#include "dist/thread_group.h"
#include "kernels/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/dist/single_process.h"
#include "mixprec/ops/sync_batchnorm.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/ops/normalization.h"

namespace mixprec::dist {
namespace {

using testing::ThreadGroup;

// ---- the arithmetic ----

TEST(SyncBatchNormMath, CombinedMomentsEqualTheUnionsTwoPassMoments) {
  // Mean 1e4 and spread 1: sum x^2 - n mean^2 would lose every digit in double already at
  // 1e8 against 1, f32 long before; Chan's combination has no subtraction of large terms.
  const std::vector<std::vector<double>> parts = {
      {10000.5, 9999.25, 10001.0}, {}, {10000.0}, {9998.5, 10000.75, 10002.0, 9999.0}};
  ops::detail::Moments all;
  std::vector<double> union_values;
  for (const std::vector<double>& p : parts) {
    double sum = 0.0;
    for (double v : p) sum += v;
    const double mean = p.empty() ? 0.0 : sum / static_cast<double>(p.size());
    double m2 = 0.0;
    for (double v : p) m2 += (v - mean) * (v - mean);
    all = ops::detail::combine(all, {static_cast<double>(p.size()), mean, m2});
    union_values.insert(union_values.end(), p.begin(), p.end());
  }
  double sum = 0.0;
  for (double v : union_values) sum += v;
  const double mean = sum / static_cast<double>(union_values.size());
  double m2 = 0.0;
  for (double v : union_values) m2 += (v - mean) * (v - mean);
  EXPECT_EQ(all.count, 8.0);
  EXPECT_NEAR(all.mean, mean, 1e-12 * mean);
  EXPECT_NEAR(all.m2, m2, 1e-12 * m2);
  // Empty sides change nothing.
  const ops::detail::Moments a{3.0, 2.0, 5.0};
  EXPECT_EQ(ops::detail::combine(a, {}).m2, 5.0);
  EXPECT_EQ(ops::detail::combine({}, a).mean, 2.0);
}

TEST(SyncBatchNormMath, SplitDoublesKeepAbout48Bits) {
  for (double v : {0.0, 1.0 / 3.0, -3.14159265358979e6, 1e-20, 6.02214076e23, -1e30,
                   123456789.123456789}) {
    const ops::detail::SplitDouble s = ops::detail::split_double(v);
    EXPECT_EQ(s.hi, static_cast<float>(v)) << v;
    EXPECT_NEAR(ops::detail::join_double(s.hi, s.lo), v, std::ldexp(std::fabs(v), -47)) << v;
  }
  // Beyond the f32 range: Inf (not Inf + -Inf = NaN); NaN stays NaN.
  const double inf = std::numeric_limits<double>::infinity();
  for (double v : {1e300, inf}) {
    const ops::detail::SplitDouble s = ops::detail::split_double(v);
    EXPECT_EQ(ops::detail::join_double(s.hi, s.lo), inf);
    EXPECT_EQ(ops::detail::join_double(-s.hi, -s.lo), -inf);
  }
  const ops::detail::SplitDouble n = ops::detail::split_double(std::nan(""));
  EXPECT_TRUE(std::isnan(ops::detail::join_double(n.hi, n.lo)));
}

TEST(SyncBatchNormMath, AllgatherDoublesGivesEveryRankEveryValueExactly) {
  ThreadGroup(3).run([](const Communicator& comm) {
    const double r = comm.rank();
    const std::vector<double> mine = {r + 1.0 / 3.0, -1e6 * (r + 1), 1e-30 * (r + 1), 0.0};
    std::vector<double> all;
    std::vector<float> scratch;
    ops::detail::allgather_doubles(comm, mine, all, scratch);
    ASSERT_EQ(all.size(), 12u);
    for (int k = 0; k < 3; ++k) {
      const std::vector<double> theirs = {k + 1.0 / 3.0, -1e6 * (k + 1), 1e-30 * (k + 1), 0.0};
      for (std::size_t i = 0; i < theirs.size(); ++i) {
        const ops::detail::SplitDouble s = ops::detail::split_double(theirs[i]);
        // Bit for bit what the sender split: the f32 wire moves bits.
        EXPECT_EQ(all[static_cast<std::size_t>(k) * 4 + i], ops::detail::join_double(s.hi, s.lo));
      }
    }
  });
}

TEST(SyncBatchNormMath, TheThreadGroupKeepsTheCommunicatorContract) {
  // The test double must behave like the MPI communicator where the op relies on it.
  ThreadGroup(3).run([](const Communicator& comm) {
    const float r = static_cast<float>(comm.rank());
    std::vector<float> v = {1e8f, r + 1.0f, -r, 0.5f * r, 3.0f, r};  // 6 = 3 shards of 2
    comm.allreduce_sum(v.data(), v.size());
    EXPECT_EQ(v, (std::vector<float>{(1e8f + 1e8f) + 1e8f, (1.0f + 2.0f) + 3.0f, -3.0f, 1.5f,
                                     9.0f, 3.0f}));
    std::vector<float> g(7, -1.0f);
    const Shard mine = comm.my_shard(g.size());
    for (std::size_t i = mine.begin; i < mine.end(); ++i) g[i] = 10.0f * r + static_cast<float>(i);
    comm.allgather(g.data(), g.size());
    for (int k = 0; k < comm.size(); ++k) {
      const Shard s = comm.shard(g.size(), k);
      for (std::size_t i = s.begin; i < s.end(); ++i) EXPECT_EQ(g[i], 10.0f * k + static_cast<float>(i));
    }
    std::vector<float> w = {1.0f + 1.0f / 1024.0f};  // not a bf16 value: rounds to 1 on the wire
    comm.allreduce_sum(w.data(), 1, WireDType::bf16);
    EXPECT_EQ(w[0], 3.0f);
    EXPECT_EQ(comm.allreduce_sum(0.25 * comm.rank()), 0.75);
    EXPECT_TRUE(std::isnan(comm.allreduce_max(comm.rank() == 1 ? std::nan("") : 1.0)));
    std::string text = comm.rank() == 2 ? "from rank 2" : "";
    comm.broadcast(text, 2);
    EXPECT_EQ(text, "from rank 2");
  });
}

// ---- the op against one batch_norm over the whole batch ----

struct BnRun {
  std::vector<float> y, dx, dw, db, running_mean, running_var;
};

constexpr float kMomentum = 0.25f;

std::vector<float> values(std::int64_t n, std::uint64_t seed, float lo, float hi) {
  return Tensor::uniform({n}, seed, lo, hi).to_vector();
}

/// Training-mode batch norm of x with upstream gradient g: sync_batch_norm over comm, or plain
/// batch_norm when comm is null. x and g are f32; the op runs in `dtype`.
BnRun run_bn(const Tensor& x_f32, const Tensor& g_f32, DType dtype, const Communicator* comm) {
  const std::int64_t c = x_f32.size(1);
  Tensor x = x_f32.to(dtype).detach();
  x.set_requires_grad(true);
  Tensor w = Tensor::from_vector(values(c, 31, 0.5f, 1.5f), {c});
  Tensor b = Tensor::from_vector(values(c, 32, -0.5f, 0.5f), {c});
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor rm = Tensor::from_vector(values(c, 33, -1.0f, 1.0f), {c});
  Tensor rv = Tensor::from_vector(values(c, 34, 0.5f, 2.0f), {c});
  const Tensor y = comm != nullptr ? ops::sync_batch_norm(*comm, x, rm, rv, w, b, kMomentum, 1e-5f)
                                   : batch_norm(x, rm, rv, w, b, true, kMomentum, 1e-5f);
  EXPECT_EQ(y.dtype(), dtype);
  y.backward(g_f32.to(dtype));
  return {y.to_vector(),  x.grad().to_vector(),  w.grad().to_vector(),
          b.grad().to_vector(), rm.to_vector(), rv.to_vector()};
}

/// A batch whose channel 0 sits at 1000 with spread 1 (a naive sum-of-squares variance would
/// cancel there) and the others at 0.5 with spread 2.
Tensor make_x(const Shape& shape) {
  Tensor x = Tensor::randn(shape, 7, DType::f32, 0.5f, 2.0f);
  std::vector<float> v = x.to_vector();
  const std::int64_t n = shape[0], c = shape[1], s = numel(shape) / (n * c);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < s; ++j) {
      float& e = v[static_cast<std::size_t>(i * c * s + j)];
      e = 1000.0f + (e - 0.5f) / 2.0f;
    }
  return Tensor::from_vector(v, shape);
}

/// |got[i] - want[offset + i]| <= atol(channel) + rel * |want| for every i, where element
/// offset + i of want [N, C, S] is in channel ((offset + i) / s) % c.
void expect_near_all(const std::vector<float>& got, const std::vector<float>& want,
                     std::size_t offset, double atol, double rel, const std::string& what,
                     std::int64_t c = 1, std::int64_t s = 1, double atol_channel0 = 0.0) {
  ASSERT_LE(offset + got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto channel = static_cast<std::int64_t>(offset + i) / s % c;
    const double a = channel == 0 && atol_channel0 > 0.0 ? atol_channel0 : atol;
    ASSERT_NEAR(got[i], want[offset + i], a + rel * std::fabs(want[offset + i]))
        << what << " [" << i << "]";
  }
}

using testing::BackendScope;

struct SplitCase {
  Shape shape;
  std::vector<std::int64_t> rows;  // the ranks' shard sizes, summing to shape[0]
  DType dtype;
};

/// atol_channel0: the tolerance of the channel at 1000 (0: the others').
void check_against_one_batch_norm(const SplitCase& sc, double atol_channel0) {
  const Tensor x = make_x(sc.shape);
  const Tensor g = Tensor::uniform(sc.shape, 8, -1.0f, 1.0f);
  const BnRun one = run_bn(x, g, sc.dtype, nullptr);
  const int ranks = static_cast<int>(sc.rows.size());
  std::vector<BnRun> got(sc.rows.size());
  std::vector<std::int64_t> begin(sc.rows.size() + 1, 0);
  for (std::size_t r = 0; r < sc.rows.size(); ++r) begin[r + 1] = begin[r] + sc.rows[r];
  ASSERT_EQ(begin.back(), sc.shape[0]);
  ThreadGroup(ranks).run([&](const Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    const Tensor xs = x.slice(0, begin[r], begin[r + 1]).contiguous();
    const Tensor gs = g.slice(0, begin[r], begin[r + 1]).contiguous();
    got[r] = run_bn(xs, gs, sc.dtype, &comm);
  });
  // f32: the statistics agree to a few f32 roundings, the outputs (|xhat| <~ 4) to ~1e-6; a
  // 16-bit output may round to the neighbouring value (2^-8 relative for bf16).
  const double rel = sc.dtype == DType::f32 ? 1e-5 : 2.0 * traits(sc.dtype).epsilon;
  const std::int64_t per_row = numel(sc.shape) / sc.shape[0];
  const std::int64_t c = sc.shape[1], plane = per_row / c;
  std::vector<float> dw(one.dw.size(), 0.0f), db(one.db.size(), 0.0f);
  for (std::size_t r = 0; r < got.size(); ++r) {
    const std::string where = "rank " + std::to_string(r) + " of " + std::to_string(ranks);
    const auto offset = static_cast<std::size_t>(begin[r] * per_row);
    expect_near_all(got[r].y, one.y, offset, 1e-5, rel, where + " y", c, plane, atol_channel0);
    expect_near_all(got[r].dx, one.dx, offset, 1e-5, rel, where + " dx", c, plane, atol_channel0);
    // The running statistics come from the global batch, bit-identical on every rank.
    EXPECT_EQ(got[r].running_mean, got[0].running_mean) << where;
    EXPECT_EQ(got[r].running_var, got[0].running_var) << where;
    for (std::size_t i = 0; i < dw.size(); ++i) {
      dw[i] += got[r].dw[i];
      db[i] += got[r].db[i];
    }
  }
  expect_near_all(got[0].running_mean, one.running_mean, 0, 1e-6, 1e-6, "running_mean");
  expect_near_all(got[0].running_var, one.running_var, 0, 1e-6, 1e-5, "running_var", c, 1,
                  atol_channel0);
  // The ranks' shares of the parameter gradients add up to the whole batch's.
  const double sum_atol = 1e-6 * static_cast<double>(numel(sc.shape) / sc.shape[1]);
  expect_near_all(dw, one.dw, 0, sum_atol, rel, "sum of dweight", c, 1,
                  atol_channel0 * static_cast<double>(numel(sc.shape) / c));
  expect_near_all(db, one.db, 0, sum_atol, rel, "sum of dbias");
}

TEST(SyncBatchNorm, RanksMatchOneBatchNormOverTheConcatenatedBatch) {
  const std::vector<SplitCase> cases = {
      {{8, 3, 5, 5}, {4, 4}, DType::f32},         // planes of 25: the per-row kernels
      {{9, 3, 3, 3}, {3, 3, 3}, DType::f32},      // planes of 9: the per-column kernels
      {{12, 5}, {2, 7, 3}, DType::f32},           // [N, C], uneven shards
      {{6, 2, 17}, {5, 0, 1}, DType::f32},        // an empty shard and a shard of one sample
      {{8, 3, 5, 5}, {4, 4}, DType::bf16},
      {{8, 4, 20}, {3, 5}, DType::f16},
  };
  // On the reference kernels (double sums) the two agree to f32 roundings in every channel.
  // The cpu kernels add runs of values in f32 before widening, so a channel whose mean is 1000
  // times its spread gets a mean off by ~1e-4 of the spread in one process already (and off
  // differently in each rank's shard): that channel gets a tolerance of 2e-3.
  for (const char* backend : {"ref", "cpu"}) {
    BackendScope scope(backend);
    for (const SplitCase& sc : cases) {
      SCOPED_TRACE(to_string(sc.shape) + " over " + std::to_string(sc.rows.size()) + " ranks, " +
                   name(sc.dtype) + ", backend " + backend);
      check_against_one_batch_norm(sc, std::string(backend) == "ref" ? 0.0 : 2e-3);
    }
  }
}

TEST(SyncBatchNorm, OneRankIsPlainBatchNormBitForBit) {
  const Tensor x = make_x({6, 3, 4, 4});
  const Tensor g = Tensor::uniform({6, 3, 4, 4}, 8, -1.0f, 1.0f);
  for (DType dtype : {DType::f32, DType::bf16}) {
    const BnRun plain = run_bn(x, g, dtype, nullptr);
    SingleProcess single;
    std::vector<BnRun> runs = {run_bn(x, g, dtype, &single)};
    ThreadGroup(1).run([&](const Communicator& comm) { runs.push_back(run_bn(x, g, dtype, &comm)); });
    for (const BnRun& r : runs) {
      EXPECT_EQ(r.y, plain.y);
      EXPECT_EQ(r.dx, plain.dx);
      EXPECT_EQ(r.dw, plain.dw);
      EXPECT_EQ(r.db, plain.db);
      EXPECT_EQ(r.running_mean, plain.running_mean);
      EXPECT_EQ(r.running_var, plain.running_var);
    }
  }
}

TEST(SyncBatchNorm, TheGlobalBatchNeedsMoreThanOneValuePerChannel) {
  // Shards of one sample each: plain batch_norm refuses each, the global batch of two is fine.
  ThreadGroup(2).run([](const Communicator& comm) {
    Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
    const Tensor x = Tensor::randn({1, 3}, 3 + static_cast<std::uint64_t>(comm.rank()));
    EXPECT_THROW(batch_norm(x, rm, rv, Tensor(), Tensor(), true), ValueError);
    const std::vector<float> y = ops::sync_batch_norm(comm, x, rm, rv, Tensor(), Tensor()).to_vector();
    for (float v : y) EXPECT_NEAR(std::fabs(v), 1.0f, 1e-3f);  // two values: +-1 after norm
  });
  // One value in the whole batch: refused on every rank, none left waiting.
  int refused = 0;
  std::mutex mu;
  ThreadGroup(2).run([&](const Communicator& comm) {
    Tensor rm = Tensor::zeros({3}), rv = Tensor::ones({3});
    const Tensor x = Tensor::randn({comm.rank() == 0 ? 1 : 0, 3}, 3);
    try {
      ops::sync_batch_norm(comm, x, rm, rv, Tensor(), Tensor());
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("over 2 ranks"), std::string::npos) << e.what();
      std::lock_guard<std::mutex> lock(mu);
      ++refused;
    }
  });
  EXPECT_EQ(refused, 2);
}

// ---- the layer ----

/// A communicator that fails the test if any collective is called.
class NoCollectives final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void reduce_scatter_sum(float*, std::size_t, WireDType) const override {
    ADD_FAILURE() << "reduce_scatter_sum";
  }
  std::unique_ptr<PendingReduction> start_reduce_scatter_sum(float*, std::size_t, Shard, int,
                                                             WireDType) const override {
    ADD_FAILURE() << "start_reduce_scatter_sum";
    return nullptr;
  }
  void allgather(float*, std::size_t, WireDType) const override { ADD_FAILURE() << "allgather"; }
  double allreduce_max(double v) const override {
    ADD_FAILURE() << "allreduce_max";
    return v;
  }
  using Communicator::allreduce_sum;
  double allreduce_sum(double v) const override {
    ADD_FAILURE() << "allreduce_sum";
    return v;
  }
  void broadcast(std::string&, int) const override { ADD_FAILURE() << "broadcast"; }
  void barrier() const override { ADD_FAILURE() << "barrier"; }
  std::string name() const override { return "no collectives"; }
};

TEST(SyncBatchNorm, LayerSynchronisesInTrainingModeOnly) {
  const Tensor x = make_x({8, 2, 4, 4});
  nn::BatchNorm2d whole(2);
  const std::vector<float> want = whole(x).to_vector();
  std::vector<std::vector<float>> got(2);
  std::vector<std::vector<float>> running(2);
  ThreadGroup(2).run([&](const Communicator& comm) {
    nn::BatchNorm2d bn(2);
    EXPECT_EQ(bn.sync(), nullptr);
    bn.set_sync(&comm);
    EXPECT_EQ(bn.sync(), &comm);
    const std::int64_t r = comm.rank();
    got[static_cast<std::size_t>(r)] = bn(x.slice(0, 4 * r, 4 * r + 4).contiguous()).to_vector();
    running[static_cast<std::size_t>(r)] = bn.running_var().to_vector();
  });
  expect_near_all(got[0], want, 0, 1e-5, 1e-5, "rank 0");
  expect_near_all(got[1], want, got[0].size(), 1e-5, 1e-5, "rank 1");
  EXPECT_EQ(running[0], running[1]);
  expect_near_all(running[0], whole.running_var().to_vector(), 0, 1e-6, 1e-5, "running_var");

  // Eval mode normalises with the running statistics: no communication at all.
  NoCollectives comm;
  nn::BatchNorm2d bn(2);
  bn.set_sync(&comm);
  bn.eval();
  whole.eval();
  const Tensor y = bn(x);
  bn.load_state_dict(whole.state_dict());
  EXPECT_EQ(bn(x).to_vector(), whole(x).to_vector());
  (void)y;
}

TEST(SyncBatchNorm, SetSyncBatchnormReachesEveryBatchNormInTheTree) {
  auto inner = nn::sequential({std::make_shared<nn::BatchNorm1d>(4), std::make_shared<nn::ReLU>()});
  auto model = nn::sequential({std::make_shared<nn::BatchNorm2d>(3), inner,
                               std::make_shared<nn::LayerNorm>(4)});
  SingleProcess comm;
  EXPECT_EQ(nn::set_sync_batchnorm(*model, &comm), 2);
  const auto* bn2 = dynamic_cast<const nn::BatchNormBase*>(model->children()[0].second.get());
  const auto* bn1 = dynamic_cast<const nn::BatchNormBase*>(inner->children()[0].second.get());
  ASSERT_TRUE(bn1 != nullptr && bn2 != nullptr);
  EXPECT_EQ(bn1->sync(), &comm);
  EXPECT_EQ(bn2->sync(), &comm);
  EXPECT_EQ(nn::set_sync_batchnorm(*model, nullptr), 2);
  EXPECT_EQ(bn1->sync(), nullptr);
  EXPECT_EQ(nn::set_sync_batchnorm(*std::make_shared<nn::ReLU>(), &comm), 0);
}

}  // namespace
}  // namespace mixprec::dist
