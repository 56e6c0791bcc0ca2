// Data parallelism's pieces that need no second process: ShardedBatches cuts each batch into the
// ranks' row ranges (whose union is the batch, targets following their rows, language-model
// targets by window) and refuses a batch the ranks cannot share; GradientSync and
// mean_over_ranks are the identity for one rank. The multi-rank behaviour is
// tests/dist/data_parallel.sh (mpirun).
#include <gtest/gtest.h>

#include <memory>

#include "mixprec/core/error.h"
#include "mixprec/dist/data_parallel.h"
#include "mixprec/dist/single_process.h"

using namespace mixprec;

namespace {

// One epoch of fixed batches: batch b holds rows valued 100*b + row, with `per_row` targets each.
class FixedBatches : public data::BatchSource {
 public:
  FixedBatches(std::int64_t rows, std::int64_t per_row) : rows_(rows), per_row_(per_row) {}
  std::int64_t batches_per_epoch() const override { return 2; }
  void start_epoch(std::int64_t, std::int64_t first_batch) override { next_ = first_batch; }
  bool next(data::Batch& out) override {
    if (next_ >= 2) return false;
    std::vector<float> x;
    out.targets.clear();
    for (std::int64_t r = 0; r < rows_; ++r) {
      x.push_back(static_cast<float>(100 * next_ + r));
      for (std::int64_t k = 0; k < per_row_; ++k) out.targets.push_back(10 * r + k);
    }
    out.inputs = Tensor::from_vector(x, {rows_, 1});
    out.index = next_++;
    return true;
  }

 private:
  std::int64_t rows_, per_row_, next_ = 0;
};

}  // namespace

TEST(ShardedBatches, TheRanksRowsMakeUpTheBatchWithTheirTargets) {
  for (int rank = 0; rank < 3; ++rank) {
    dist::ShardedBatches shard(std::make_shared<FixedBatches>(6, 2), rank, 3);
    EXPECT_EQ(shard.batches_per_epoch(), 2);
    shard.start_epoch(0);
    data::Batch b;
    ASSERT_TRUE(shard.next(b));
    EXPECT_EQ(b.inputs.to_vector(), (std::vector<float>{2.0f * rank, 2.0f * rank + 1}));
    EXPECT_EQ(b.targets, (std::vector<std::int64_t>{20 * rank, 20 * rank + 1, 20 * rank + 10, 20 * rank + 11}));
    ASSERT_TRUE(shard.next(b));
    EXPECT_EQ(b.index, 1);
    EXPECT_EQ(b.inputs.to_vector()[0], 100.0f + 2.0f * rank);
    EXPECT_FALSE(shard.next(b));
  }
}

TEST(ShardedBatches, ABatchTheRanksCannotShareIsRefusedNamingTheFlag) {
  dist::ShardedBatches shard(std::make_shared<FixedBatches>(5, 1), 0, 2);
  shard.start_epoch(0);
  data::Batch b;
  try {
    shard.next(b);
    ADD_FAILURE() << "5 samples shared by 2 ranks";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--batch-size"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dist::ShardedBatches(nullptr, 0, 2), ValueError);
  EXPECT_THROW(dist::ShardedBatches(std::make_shared<FixedBatches>(4, 1), 2, 2), ValueError);
}

TEST(DataParallel, OneRankLeavesGradientsAndValuesAlone) {
  const dist::SingleProcess one;
  Tensor p = Tensor::randn({3, 2}, 1);
  p.set_requires_grad(true);
  p.set_grad(Tensor::full({3, 2}, 0.25f));
  dist::GradientSync sync(one, {p}, dist::WireDType::bf16);
  sync.average();
  EXPECT_EQ(p.grad().to_vector(), std::vector<float>(6, 0.25f));
  EXPECT_EQ(dist::mean_over_ranks(one, 1.2345678901234), 1.2345678901234);
}
