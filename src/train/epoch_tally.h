#pragma once
// The running figures of one epoch's training half (loss and gradient-norm sums, counts, time),
// from which its metrics are computed. A resumed partial epoch continues them from its
// checkpoint: exactly from the stored sums, or, for checkpoints written before those were
// stored, as means times counts (which may differ in the last bit).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "mixprec/tensor/tensor.h"
#include "mixprec/core/transfer.h"
#include "mixprec/train/trainer.h"
#include "train/train_checkpoint.h"

namespace mixprec::train::detail {

struct EpochTally {
  double loss_sum = 0;        // finite micro-batch losses
  std::int64_t micro = 0;     // micro-batches, including those whose loss was not finite
  // Losses that came out Inf/NaN (a forward overflow in fp16; the scaler skips those steps)
  // stay out of the mean, which would otherwise say nothing for the rest of the epoch.
  std::int64_t nonfinite = 0;
  double norm_sum = 0;        // finite gradient norms
  std::int64_t norms = 0;
  double norm_max = 0;
  std::int64_t samples = 0;   // this rank's
  double seconds_before = 0;  // training time before a resume
  std::int64_t skipped_before = 0;  // the scaler's skip count when this epoch (or its first part) began

  // Continues the epoch `partial` (from a checkpoint, `sums` its exact sums if stored) trained
  // with `accum` micro-batches per step on `ranks` ranks; skipped_before must already hold the
  // scaler's current count.
  void continue_from(const EpochMetrics& partial, const std::optional<PartialSums>& sums, int accum, int ranks) {
    micro = partial.epoch_batches;
    nonfinite = partial.nonfinite_losses;
    if (sums) {
      loss_sum = sums->loss_sum;
      norm_sum = sums->norm_sum;
      norms = sums->norms;
    } else {
      loss_sum = partial.train_loss * static_cast<double>(micro - nonfinite);
      norms = (micro + accum - 1) / accum - partial.skipped_steps;
      norm_sum = partial.grad_norm_mean * static_cast<double>(norms);
    }
    norm_max = partial.grad_norm_max;
    seconds_before = partial.train_seconds;
    samples = partial.train_samples / ranks;
    skipped_before -= partial.skipped_steps;
  }
  void add_loss(double value, std::int64_t batch_samples) {
    if (std::isfinite(value)) {
      loss_sum += value;
    } else {
      ++nonfinite;
    }
    samples += batch_samples;
    ++micro;
  }
  void add_norm(float norm) {
    if (!std::isfinite(norm)) return;
    norm_sum += norm;
    ++norms;
    norm_max = std::max(norm_max, static_cast<double>(norm));
  }
  // A step's norm still on the device (0-d f32): copied into the next slot of a device buffer,
  // read with one download when the buffer is full or a figure is needed (flush_norms), and
  // added in step order, so the sums are the same as adding each norm when it came.
  void add_norm(const Tensor& norm) {
    if (!pending_norms.defined()) {
      pending_norms = Tensor::empty({kPendingNorms}, DType::f32, MemoryCategory::workspace);
    }
    device_copy(pending_norms.data<float>() + pending, norm.data_ptr(), sizeof(float),
                pending_norms.device());
    if (++pending == kPendingNorms) flush_norms();
  }
  void flush_norms() {
    if (pending == 0) return;
    const TransferReason why("gradient norms for the epoch's figures");
    const std::vector<float> values = pending_norms.slice(0, 0, pending).to_vector();
    pending = 0;
    for (const float v : values) add_norm(v);
  }
  static constexpr std::int64_t kPendingNorms = 256;
  Tensor pending_norms;       // f32 [kPendingNorms] on the device
  std::int64_t pending = 0;
  // This rank's mean of the finite losses (0 before any).
  double mean_loss() const {
    return micro > nonfinite ? loss_sum / static_cast<double>(micro - nonfinite) : 0.0;
  }
};

}  // namespace mixprec::train::detail
