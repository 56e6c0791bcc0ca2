// launch.cuh's stream() for host .cpp files, which cannot include launch.cuh (device code):
// cuDNN (cudnn_session.cpp, conv_cudnn.cpp) runs on the one stream every kernel of the backend
// uses, the core's (core/cuda_runtime.h, cuda_stream()).
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream_bridge.h"

namespace mixprec::kernels::cuda {

cudaStream_t backend_stream() { return stream(); }

}  // namespace mixprec::kernels::cuda
