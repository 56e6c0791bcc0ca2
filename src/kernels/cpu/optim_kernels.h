#pragma once
/// Hand-written AVX-512 optimizer kernels (being replaced by the Highway version).
#include "kernels/optim.h"

namespace mixprec::kernels {
// --- AVX-512F (+BW/VL/DQ, F16C), bit-identical to the reference: the same fma/mul/div/sqrt
// sequence, each correctly rounded. kWriteStochastic with f16 parameters is not supported here
// (the dispatcher routes it to the reference). Call only when max_isa() >= Isa::avx512. ---

/// One SGD update of `count` elements, 16 lanes.
void sgd_update_avx512(const OptimArrays& a, const SgdScalars& s, std::size_t count) noexcept;
/// One Adam/AdamW update of `count` elements, 16 lanes.
void adam_update_avx512(const OptimArrays& a, const AdamScalars& s, std::size_t count) noexcept;

}  // namespace mixprec::kernels
