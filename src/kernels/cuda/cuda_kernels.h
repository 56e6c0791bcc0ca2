#pragma once
// The kernels the cuda backend implements, each with its ref:: declaration's type (the one
// written signature), from the families' lists. Defined in the .cu files of this folder.
#include "kernels/elementwise.h"

namespace mixprec::kernels::cuda {

#define MIXPREC_CUDA_DECLARATION(entry) decltype(ref::entry) entry;
MIXPREC_ELEMENTWISE_KERNELS(MIXPREC_CUDA_DECLARATION)
#undef MIXPREC_CUDA_DECLARATION

}  // namespace mixprec::kernels::cuda
