#pragma once
/// BatchSource: what a training loop pulls mini-batches from, epoch by epoch, whatever the data
/// (an in-memory Dataset through DataLoader, windows of a text corpus through TextWindows).
/// The Trainer and the data-parallel code see only this interface.
#include <cstdint>
#include <vector>

#include "mixprec/tensor/device_indices.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::data {

/// One mini-batch. Its tensor is freshly allocated (MemoryCategory::workspace) and owned by
/// the Batch: it stays valid for as long as the caller keeps it, whatever the source does next.
struct Batch {
  /// [B, sample_shape...] f32, contiguous: the samples' inputs in batch order (token ids are
  /// whole numbers stored in f32).
  Tensor inputs;
  /// Class ids: one per sample (classification), or one per predicted position in row-major
  /// order (language modelling: B * T next tokens).
  std::vector<std::int64_t> targets;
  /// Real-valued targets, one per sample (regression); empty otherwise (then targets holds
  /// the class ids).
  std::vector<float> values;
  /// The targets already on the device, when a caller put them there (a captured step's static
  /// copy, train/step_graphs.h): the training loss then reads these instead of uploading
  /// `targets`, which still say how many there are.
  DeviceIndices device_targets;
  /// Position of this batch within its epoch (0-based; counts the skipped first_batch ones).
  std::int64_t index = 0;
};

/// What a batch source's producer does with a batch it assembled on the host (`host_inputs`,
/// f32 [B, ...]): uploads the inputs to the current device into batch.inputs and, on a device
/// other than the host, the class targets into batch.device_targets, so that the training step
/// transfers nothing (the loss reads them there; a captured graph copies them on the device).
/// On the cpu, batch.inputs is host_inputs and nothing moves.
void stage_on_device(Batch& batch, const Tensor& host_inputs);

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// Batches in one epoch.
  virtual std::int64_t batches_per_epoch() const = 0;
  /// Begins epoch `epoch` (>= 0) at batch first_batch; the batches of an epoch are a pure
  /// function of the source's seed and `epoch`. ValueError on a negative epoch or an
  /// out-of-range first_batch.
  virtual void start_epoch(std::int64_t epoch, std::int64_t first_batch = 0) = 0;
  /// Replaces out with the next batch and returns true, or returns false when the epoch is over.
  virtual bool next(Batch& out) = 0;
};

}  // namespace mixprec::data
