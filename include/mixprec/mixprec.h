#pragma once
/// The umbrella header: every public header of mixprec, floor by floor from the bottom
/// (docs/ARCHITECTURE.md, "Layers").

// core/: scalar types, errors, devices, memory; the scalar conversions and random numbers
#include "mixprec/core/cpu_class.h"
#include "mixprec/core/cpu_features.h"
#include "mixprec/core/cpu_model.h"
#include "mixprec/core/device.h"
#include "mixprec/core/dtype.h"
#include "mixprec/core/error.h"
#include "mixprec/core/float8.h"
#include "mixprec/core/fp8_table.h"
#include "mixprec/core/half.h"
#include "mixprec/core/memory.h"
#include "mixprec/core/random.h"
#include "mixprec/core/stochastic_rounding.h"
#include "mixprec/core/storage.h"
#include "mixprec/core/transfer.h"
#include "mixprec/core/verbose.h"

// kernels/: the public entry points of the kernels: bulk conversions, random bits, cuDNN
#include "mixprec/kernels/convert_arrays.h"
#include "mixprec/kernels/cudnn.h"
#include "mixprec/kernels/random_arrays.h"

// tensor/: Tensor
#include "mixprec/tensor/tensor.h"

// runtime/: autograd, autocast and its policy table, the profiler, threads, collectives
#include "mixprec/runtime/anomaly.h"
#include "mixprec/runtime/attention_precision.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/communicator.h"
#include "mixprec/runtime/function.h"
#include "mixprec/runtime/matmul_precision.h"
#include "mixprec/runtime/node.h"
#include "mixprec/runtime/op_policy.h"
#include "mixprec/runtime/profiler.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/runtime/weight_copies.h"

// ops/: differentiable ops
#include "mixprec/ops/attention.h"
#include "mixprec/ops/combine.h"
#include "mixprec/ops/conv.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/embedding.h"
#include "mixprec/ops/fp8.h"
#include "mixprec/ops/masking.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/ops/normalization.h"
#include "mixprec/ops/reduce.h"
#include "mixprec/ops/sync_batchnorm.h"

// nn/: modules
#include "mixprec/nn/checkpoint.h"
#include "mixprec/nn/conv_layers.h"
#include "mixprec/nn/embedding_layer.h"
#include "mixprec/nn/gpt.h"
#include "mixprec/nn/gpt_sampling.h"
#include "mixprec/nn/layers.h"
#include "mixprec/nn/module.h"
#include "mixprec/nn/norm_layers.h"
#include "mixprec/nn/residual.h"
#include "mixprec/nn/resnet.h"
#include "mixprec/nn/transformer.h"

// optim/: optimizers
#include "mixprec/optim/adam.h"
#include "mixprec/optim/clip_grad.h"
#include "mixprec/optim/ema.h"
#include "mixprec/optim/lr_scheduler.h"
#include "mixprec/optim/optimizer.h"
#include "mixprec/optim/param_groups.h"
#include "mixprec/optim/sgd.h"

// amp/: loss scaling, precision modes
#include "mixprec/amp/autocast.h"
#include "mixprec/amp/grad_scaler.h"
#include "mixprec/amp/precision.h"

// data/: datasets and loaders
#include "mixprec/data/batch_source.h"
#include "mixprec/data/csv.h"
#include "mixprec/data/dataloader.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/idx.h"
#include "mixprec/data/image_folder.h"
#include "mixprec/data/synthetic.h"
#include "mixprec/data/tabular.h"
#include "mixprec/data/text_corpus.h"

// io/: files: checkpoints, safetensors, TensorBoard
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/crc32c.h"
#include "mixprec/io/directory_lock.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/io/sha256.h"
#include "mixprec/io/tensorboard.h"

// models/: the model registry
#include "mixprec/models/zoo.h"

// numerics/: number formats, cast statistics, plots
#include "mixprec/numerics/formats.h"
#include "mixprec/numerics/svg_plot.h"
#include "mixprec/numerics/tensor_stats.h"

// dist/: data-parallel training
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/communicator.h"
#include "mixprec/dist/data_parallel.h"
#include "mixprec/dist/sharded_parameters.h"
#include "mixprec/dist/single_process.h"
#include "mixprec/dist/world.h"

// train/: the training step, the Trainer, inspect and profile
#include "mixprec/train/capture_probe.h"
#include "mixprec/train/checkpoint_model.h"
#include "mixprec/train/inspect.h"
#include "mixprec/train/machine_peaks_memory.h"
#include "mixprec/train/metrics.h"
#include "mixprec/train/precision_autopilot.h"
#include "mixprec/train/predict.h"
#include "mixprec/train/step_bench.h"
#include "mixprec/train/step_profile.h"
#include "mixprec/train/task.h"
#include "mixprec/train/train_step.h"
#include "mixprec/train/trainer.h"
