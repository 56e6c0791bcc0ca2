#pragma once
/// Synchronised batch normalisation for data-parallel training: in training mode the batch
/// statistics are those of the global batch (every rank's shard together), so N ranks normalise,
/// update the running statistics and back-propagate exactly as one process with the whole batch
/// would (up to the order of floating-point additions). Without it each rank normalises with its
/// own shard's statistics, which is cheaper but computes a different function of the global
/// batch (and lets the ranks' running statistics drift apart). See docs/distributed.md.
#include "mixprec/tensor/tensor.h"
#include "mixprec/runtime/communicator.h"

namespace mixprec::ops {

/// Training-mode batch_norm (ops/normalization.h) of x [N, C, ...], this rank's shard of the
/// global batch, with the statistics of every rank's shard: each rank computes per-channel count,
/// mean and squared deviations (double), the ranks exchange them (one collective) and combine
/// them with Chan's parallel formula in rank order, so every rank normalises with the same f32
/// mean and biased variance and updates running_mean/running_var (if defined) identically, the
/// variance unbiased with the global count. Backward is collective too: the per-channel sums of
/// dy and dy * (x - mean) are exchanged, so this rank's dx is its rows of the global batch's dx
/// for the same dy. The weight/bias gradients are this rank's share: their sum over the ranks is
/// the global batch's gradient (their mean, as dist::GradientSync takes it, matches a loss that
/// is the mean of the ranks' losses). Output in x's dtype; statistics in f32 or wider; autocast:
/// batch_norm's row (pass-through). Every rank must call it at the same point with the same C;
/// shards may differ in size, even be empty, but the global batch needs more than one value per
/// channel (ValueError on every rank otherwise). comm.size() == 1: exactly batch_norm(x, ...,
/// training = true), with no communication.
Tensor sync_batch_norm(const runtime::Communicator& comm, const Tensor& x, Tensor& running_mean,
                       Tensor& running_var, const Tensor& weight, const Tensor& bias,
                       float momentum = 0.1f, float eps = 1e-5f);

}  // namespace mixprec::ops
