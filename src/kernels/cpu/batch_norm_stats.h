#pragma once
/// The batch statistics cpu::batch_norm_forward computes in training, for kernels that normalise
/// with them in a pass of their own (the fused batch norm + ReLU + max pool).
#include "kernels/norm.h"

namespace mixprec::kernels::cpu {

/// mean[c] (the f32-rounded mean of channel c's n * s values) and var[c] (the biased variance
/// about that mean), bit for bit what batch_norm_forward writes in training for the same x.
void batch_norm_training_stats(const void* x, DType x_dtype, BatchNormDims d, float* mean,
                               float* var);

}  // namespace mixprec::kernels::cpu
