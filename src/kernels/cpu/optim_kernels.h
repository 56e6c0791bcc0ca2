#pragma once
/// The Highway kernels of the fused optimizer updates (optim_simd.cpp), called by the dispatcher
/// (optim_kernels.cpp) once per chunk on one thread. Private to src/kernels/cpu.
#include <cstddef>

#include "kernels/optim.h"

namespace mixprec::kernels::cpu {

// Bit-identical to sgd_update_ref / adam_update_ref on every Highway target (the best one
// allowed by max_isa() runs). `a` holds the arrays of `count` elements, already offset; for
// kWriteStochastic a.random holds their random bits. Valid combinations only: f32 parameters
// with kWriteInPlace, 16-bit parameters with kWriteMaster or kWriteStochastic.

/// One SGD update of `count` elements.
void sgd_update_simd(const OptimArrays& a, const SgdScalars& s, std::size_t count);
/// One Adam/AdamW update of `count` elements.
void adam_update_simd(const OptimArrays& a, const AdamScalars& s, std::size_t count);

}  // namespace mixprec::kernels::cpu
