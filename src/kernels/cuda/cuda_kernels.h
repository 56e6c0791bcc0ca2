#pragma once
// The kernels the cuda backend can implement, each declared with its ref:: declaration's type
// (the one written signature), from the one list of kernels. Each is defined in the .cu (or
// cuBLASLt/cuDNN .cpp) file of its family in this folder; the table (cuda_backend.cpp) names only
// those that are.
#include "kernels/backend.h"

namespace mixprec::kernels::cuda {

#define MIXPREC_CUDA_DECLARATION(entry) decltype(ref::entry) entry;
MIXPREC_KERNEL_ENTRIES(MIXPREC_CUDA_DECLARATION)
#undef MIXPREC_CUDA_DECLARATION

}  // namespace mixprec::kernels::cuda
