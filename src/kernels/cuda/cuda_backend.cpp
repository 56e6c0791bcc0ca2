// The "cuda" backend's table: every entry is a kernel of this folder (the .cu file of its family;
// matmul through cuBLASLt). It has no fallback (the reference cannot read device memory): a call
// it does not support is one BackendError naming kernel, dtypes and backend
// (kernels::EntryPoint), never a wrong number. In a build without CUDA the table is empty;
// --device refuses cuda before it could be reached.
#include "kernels/backend.h"
#ifdef MIXPREC_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace mixprec::kernels {
namespace {

/// fp8 is storage only: the kernels that move or convert bytes take it (as on the cpu); every
/// other kernel computes in f32 from f32/bf16/f16 loads and is refused an fp8 operand here (a
/// BackendError naming kernel and dtypes), never handed bytes it would misread.
bool cuda_supports(std::size_t entry, std::span<const DType> dtypes) {
  switch (entry) {
    case entry_index("copy"): case entry_index("convert"): case entry_index("convert_stochastic"):
    case entry_index("random_bits"): case entry_index("random_uniform"): case entry_index("embedding"):
    case entry_index("where"):
    // the fp8 recipe kernels name an fp8 format they write (or whose max they use), and check
    // the dtype they compute from themselves
    case entry_index("fp8_scaled_cast"): case entry_index("fp8_scaled_cast_transpose"):
    case entry_index("fp8_scale_update"):
    // the fp8 GEMM's operands are fp8 by contract (validate_fp8_gemm checks them)
    case entry_index("fp8_gemm"):
      return true;
    default:
      return computes_in(dtypes);
  }
}

}  // namespace

const Backend& cuda_backend() {
  static const Backend b{
    .name = "cuda",
    .supports = &cuda_supports,
#ifdef MIXPREC_HAVE_CUDA
#define MIXPREC_CUDA_ENTRY(entry) .entry = &cuda::entry,
    MIXPREC_KERNEL_ENTRIES(MIXPREC_CUDA_ENTRY)
#undef MIXPREC_CUDA_ENTRY
#endif
  };
  return b;
}

}  // namespace mixprec::kernels
