#pragma once
// What `mixprec train --tensorboard DIR` writes (rank 0 only):
//   per optimizer step (x = optimizer steps taken, skipped ones included):
//     train/loss (the step's mean micro-batch loss on rank 0), train/lr and train/loss_scale (the
//     values the step used), train/grad_norm (before clipping; Inf/NaN on a skipped step is
//     written as is), train/skipped (1 when the scaler skipped the step)
//   every histogram_every steps, per parameter (its module path):
//     grad_log2/<path>, weight_log2/<path>: histograms of log2|x| over the nonzero finite
//     elements (unit-wide buckets from -150 to 20), and fp16_underflow/<path>: the fraction of
//     nonzero gradient elements with |g * loss scale| < 2^-24, which a 16-bit gradient would
//     flush to zero; the text precision_ranges (step 0) says where fp16 and bf16 end on that
//     log2 axis
//   fp8 runs, on the histogram steps (their casts counted: nn::Fp8Layers::set_observe), per fp8
//     layer and role (input, weight, grad): fp8/<path>/<role>/amax (the step's), amax_history
//     (the window's largest), scale (the next step's), saturated (fraction of elements with
//     |x * scale| beyond the format's max) and flushed (fraction of nonzero elements cast to 0)
//   per epoch (x = the epoch): epoch/<key> for every number of the JSONL epoch line, with the
//     same values, and memory/<category> for its peak memory by category
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mixprec/tensor/tensor.h"
#include "mixprec/io/tensorboard.h"
#include "mixprec/nn/fp8_layers.h"

namespace mixprec::train::detail {

class TensorBoardLog {
 public:
  /// ValueError naming dir if it cannot be written (before any training).
  TensorBoardLog(const std::string& dir, std::vector<std::string> paths, std::vector<Tensor> params,
                 std::int64_t histogram_every);
  /// Whether histograms are due for the step about to be applied (global step `step`).
  bool histograms_due(std::int64_t step) const;
  /// Histograms and underflow fractions of the parameters and their (unscaled) gradients.
  void histograms(std::int64_t step, double loss_scale, bool gradients);
  /// The fp8 layers' amax, history max, scale and (when observed) saturated/flushed fractions.
  void fp8(std::int64_t step, const std::vector<nn::Fp8LayerReport>& layers);
  void step(std::int64_t step, double loss, double lr, double loss_scale, double grad_norm, bool skipped);
  /// The JSONL epoch line's numbers, then a flush.
  void epoch(int epoch, const nlohmann::json& line);

 private:
  io::TensorBoardWriter writer_;
  std::vector<std::string> paths_;
  std::vector<Tensor> params_;
  std::int64_t histogram_every_;
};

}  // namespace mixprec::train::detail
