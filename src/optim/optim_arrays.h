#pragma once
/// The kernel view (kernels/optim.h) of the parameters an optimizer updates, built from the
/// optimizer's public accessors (the public header mixprec/optim/optimizer.h then names no kernel
/// type), and the batching every optimizer's update() shares.
#include <cstddef>
#include <vector>

#include "kernels/optim.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/optim/optimizer.h"

namespace mixprec::optim::detail {

/// The arrays of parameter u.index of `opt` updated with u.grad (contiguous, same shape):
/// parameter, gradient, fp32 master and write mode (f32: in place, plus the 16-bit weight copy
/// when one is pending; 16-bit: through the master if the optimizer keeps one, else stochastic
/// rounding), and the step's gradient multiplier. The state pointers are left null.
kernels::OptimArrays optim_arrays(const Optimizer& opt, const ParamUpdate& u);

/// Updates every parameter of `updates` through `entry` (kernels::adam_update_batch or
/// sgd_update_batch), kOptimBatchRuns parameters per call. complete(update, arrays, scalars)
/// fills in each run's state pointers and scalars (arrays come from optim_arrays, scalars
/// value-initialised).
template <class Scalars, class Complete, class Entry>
void update_in_batches(const Optimizer& opt, const std::vector<ParamUpdate>& updates,
                       const Complete& complete, const Entry& entry) {
  kernels::OptimBatch<Scalars> batch{};
  for (const ParamUpdate& u : updates) {
    kernels::OptimRun<Scalars>& run = batch.runs[batch.size++];
    run.arrays = optim_arrays(opt, u);
    run.scalars = Scalars{};
    complete(u, run.arrays, run.scalars);
    run.count = u.count;
    run.rng_stream = u.rng_stream;
    if (batch.size == kernels::kOptimBatchRuns) {
      entry(batch);
      batch.size = 0;
    }
  }
  if (batch.size > 0) entry(batch);
}

}  // namespace mixprec::optim::detail
