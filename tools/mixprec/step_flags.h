#pragma once
// Flags that `mixprec bench` and `mixprec profile` share (both run training steps of a built-in
// model on synthetic inputs), checked in one place.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "mixprec/models/zoo.h"
#include "mixprec/train/train_step.h"

namespace mixprec::tools {

/// Throws ValueError prefixed with op, naming the flag at fault: unknown --model, --steps
/// outside [1, 100000], --warmup outside [0, 100000], --batch-size outside [1, 65536],
/// --threads outside [1, 1024].
void validate_step_flags(const char* op, const std::string& model, int steps, int warmup,
                         std::int64_t batch_size, int threads);

/// Adds the model's sizes, bound to sizes: --width (seed-mlp's hidden width, or a transformer's
/// d_model), --context, --layers, --heads and --checkpoint-activations (transformers).
void add_model_size_flags(CLI::App* cmd, models::ModelOptions& sizes);
/// Throws ValueError prefixed with op for sizes the model does not take: --width other than on
/// seed-mlp (in [1, 16384]) or a transformer; transformer sizes on another model.
void validate_model_sizes(const char* op, const std::string& model, const models::ModelOptions& sizes);

/// Adds the flags of one optimizer step that `mixprec train` also has (--optimizer, --lr,
/// --weight-decay, --clip, --accum, --loss-scaling, --scaler-growth-interval, --compute, --policy,
/// --fp8-amax-history, --fp8-margin, --fp8-format), bound to step, so that `mixprec bench` times
/// the step training would run.
void add_step_config_flags(CLI::App* cmd, train::StepConfig& step);

/// The help of the fp8 recipe flags: one text for `mixprec train` and `mixprec bench`.
inline constexpr const char* kFp8AmaxHistoryHelp =
    "fp8-delayed: steps of amax history the scales come from (Transformer Engine's default is "
    "1024; 16 lets a scale follow a shrinking range)";
inline constexpr const char* kFp8MarginHelp =
    "fp8 recipes: divide every scale by 2^M, headroom for a growing amax";
inline constexpr const char* kFp8FormatHelp =
    "fp8 recipes: hybrid (E4M3 inputs and weights, E5M2 gradients) or e4m3";

}  // namespace mixprec::tools
