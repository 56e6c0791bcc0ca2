#pragma once
// The backend's stream (launch.cuh's stream()) for host .cpp files of this folder.
#include <cuda_runtime.h>

namespace mixprec::kernels::cuda {

/// launch.cuh's stream(): every kernel and library call of the cuda backend runs on it.
cudaStream_t backend_stream();

}  // namespace mixprec::kernels::cuda
