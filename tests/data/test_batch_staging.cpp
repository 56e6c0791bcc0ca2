// data::stage_on_device: a batch source's producer uploads a batch's inputs and, on a device,
// its class targets, so a training step on the device uploads nothing at all (the loss reads
// the targets where they are; a captured graph copies them on the device).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend_scope.h"
#include "mixprec/core/transfer.h"
#include "mixprec/data/batch_source.h"
#include "mixprec/models/zoo.h"
#include "mixprec/train/task.h"
#include "mixprec/train/train_step.h"

namespace mixprec::data {
namespace {

Tensor host_inputs(std::int64_t rows) {
  return Tensor::randn({rows, 784}, 3, DType::f32).to(Device{DeviceType::cpu, 0});
}

TEST(BatchStaging, PutsInputsAndTargetsOnTheDevice) {
  testing::BackendScope devsim("devsim");
  Batch b;
  b.targets = {3, 1, 4, 1};
  stage_on_device(b, host_inputs(4));
  EXPECT_EQ(b.inputs.device().type, DeviceType::devsim);
  ASSERT_TRUE(b.device_targets.defined());
  EXPECT_EQ(b.device_targets.count, 4);
  EXPECT_EQ(b.device_targets.storage->device().type, DeviceType::devsim);
  std::vector<std::int64_t> back(4);
  download(back.data(), b.device_targets.storage->data(), 4 * sizeof(std::int64_t),
           b.device_targets.storage->device());
  EXPECT_EQ(back, b.targets);
}

TEST(BatchStaging, LeavesTheCpuBatchAsItWas) {
  testing::BackendScope cpu("cpu");
  Batch b;
  b.targets = {3, 1};
  const Tensor host = host_inputs(2);
  stage_on_device(b, host);
  EXPECT_EQ(b.inputs.data_ptr(), host.data_ptr());
  EXPECT_FALSE(b.device_targets.defined());
}

TEST(BatchStaging, AStagedMicroBatchUploadsNothingInTheStep) {
  testing::BackendScope devsim("devsim");
  auto model = models::make_model("mlp", 3);
  const train::ClassificationTask task(10);
  train::TrainStep step(*model, train::StepConfig{.precision = "bf16", .scheduler = "none"});
  Batch b;
  for (int i = 0; i < 8; ++i) b.targets.push_back(i % 10);
  stage_on_device(b, host_inputs(8));
  const auto loss_of = [&](const Batch& given) {
    return task.training_loss((*model)(given.inputs), given, step.loss_gradient());
  };
  step.accumulate(b, loss_of);  // the first builds the loss gradient (a fill, not an upload)
  const TransferStats before = transfer_stats();
  step.accumulate(b, loss_of);
  const TransferStats d = transfer_delta(before, transfer_stats());
  EXPECT_EQ(d.uploads, 0u);
  EXPECT_EQ(d.downloads, 1u);  // the loss for the log
  // Without the device copy the loss uploads the targets: the check above can fail.
  Batch unstaged = b;
  unstaged.device_targets = {};
  const TransferStats before2 = transfer_stats();
  step.accumulate(unstaged, loss_of);
  EXPECT_EQ(transfer_delta(before2, transfer_stats()).uploads, 1u);
}

}  // namespace
}  // namespace mixprec::data
