// The "cuda" backend's table: what the .cu files of this folder implement, in table order
// (designated initializers). It has no fallback (the reference cannot read device memory): a
// kernel it does not have yet is one BackendError naming kernel, dtypes and backend
// (kernels::EntryPoint), never a wrong number. In a build without CUDA the table is empty;
// --device refuses cuda before it could be reached.
#include "kernels/backend.h"
#ifdef MIXPREC_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace mixprec::kernels {
namespace {

/// No kernel computes in a storage-only (fp8) dtype; every other dtype is computed in f32.
bool cuda_supports(std::size_t, std::span<const DType> dtypes) { return computes_in(dtypes); }

}  // namespace

const Backend& cuda_backend() {
  static const Backend b{
    .name = "cuda",
    .supports = &cuda_supports,
#ifdef MIXPREC_HAVE_CUDA
    .unary = &cuda::unary,
    .binary = &cuda::binary,
    .affine = &cuda::affine,
    .unary_backward = &cuda::unary_backward,
    .fill = &cuda::fill,
#endif
  };
  return b;
}

}  // namespace mixprec::kernels
