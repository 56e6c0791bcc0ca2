// launch.cuh's stream() for host .cpp files, which cannot include launch.cuh (device code):
// cuDNN (attention_cudnn.cpp) runs on the one stream every kernel of the backend uses.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream_bridge.h"

namespace mixprec::kernels::cuda {

cudaStream_t backend_stream() { return stream(); }

}  // namespace mixprec::kernels::cuda
