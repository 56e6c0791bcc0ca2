// The threads of one training process under ThreadSanitizer (the MIXPREC_SANITIZE_THREAD build
// runs this; other builds run it as an ordinary test). While one thread trains an fp16 model
// with the Trainer, whose DataLoader prefetches the next batch on its own thread, another
// thread evaluates a second model under autocast (its own cast cache) with its own prefetching
// loader and reads the memory tracker. Every tensor allocation of the three threads goes
// through the one memory tracker and block cache. Under TSan any data race between them ends
// the program with a report and a non-zero exit.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/memory.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/data/dataloader.h"
#include "mixprec/data/synthetic.h"
#include "mixprec/models/zoo.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/trainer.h"

namespace mixprec {
namespace {

TEST(ThreadSanitizer, TrainingWithPrefetchWhileAnotherThreadEvaluates) {
  // One compute thread per caller: OpenMP's own workers are not what this test is about, and
  // TSan cannot see the ordering libgomp's (uninstrumented) barriers give, so it reports races
  // between a worker's read and the next use of that memory. ctest also sets OMP_NUM_THREADS=1
  // for this test, for the threads the library starts itself (the loaders' prefetch threads).
  set_num_threads(1);
  train::TrainConfig config;
  config.model = "mlp";
  config.data = "synthetic";
  config.precision = "fp16";
  config.epochs = 2;
  config.batch_size = 32;
  config.limit_train = 640;
  config.limit_test = 128;
  config.threads = 1;
  config.progress = false;
  train::Trainer trainer(config);

  std::atomic<bool> done{false};
  std::atomic<int> evaluations{0};
  double eval_loss = 0;
  std::thread evaluator([&] {
    set_num_threads(1);  // a new thread starts with OpenMP's default, not the caller's setting
    auto model = models::make_model("mlp", 7);
    model->eval();
    const data::Dataset test = data::make_synthetic(256, 784, 10, 7, 1);
    data::DataLoaderOptions o;
    o.batch_size = 64;
    o.prefetch = true;
    data::DataLoader loader(test, o, {784});
    while (!done.load() || evaluations.load() == 0) {
      runtime::NoGradGuard no_grad;
      runtime::Autocast region(true, DType::bf16);
      loader.start_epoch(evaluations.load());
      double sum = 0;
      int batches = 0;
      for (data::Batch b; loader.next(b); ++batches) sum += cross_entropy((*model)(b.inputs), b.targets).item();
      eval_loss = sum / batches;
      (void)memory_stats();
      evaluations.fetch_add(1);
    }
  });
  const std::vector<train::EpochMetrics> history = trainer.run();
  done.store(true);
  evaluator.join();

  ASSERT_EQ(history.size(), 2u);
  EXPECT_TRUE(std::isfinite(history.back().train_loss));
  EXPECT_GT(history.back().test_accuracy, 0.0);
  EXPECT_GE(evaluations.load(), 1);
  EXPECT_TRUE(std::isfinite(eval_loss));
}

}  // namespace
}  // namespace mixprec
