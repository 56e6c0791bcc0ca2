#pragma once
/// The backend boundary: every kernel the ops, optimizers and the scaler reach, as one table of
/// function pointers. Four backends fill it:
///   - "cpu": Highway vector kernels (one source, every SIMD target, run-time dispatch) and
///     oneDNN for matmul and convolution; what it leaves empty or does not support runs on ref;
///   - "ref": the scalar reference loops, the specification every other backend is tested against;
///   - "devsim": the reference on simulated device memory (mixprec/core/device.h);
///   - "cuda": the NVIDIA GPU kernels (src/kernels/cuda/, docs/cuda.md); empty without CUDA.
/// MIXPREC_BACKEND=ref (or set_backend()) runs everything on the reference. A new backend is one
/// more table: see docs/ARCHITECTURE.md, "Adding a backend". Nothing in ops/, nn/, amp/, optim/
/// or train/ names a backend; they call the kernels:: entry points of the family headers
/// (elementwise.h, reduce.h, ...), which forward to backend().
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kernels/attention.h"
#include "kernels/backend_entries.h"
#include "kernels/conv.h"
#include "kernels/convert.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/ema.h"
#include "kernels/embedding.h"
#include "kernels/fp8_gemm.h"
#include "kernels/fp8_scale.h"
#include "kernels/masked_fill.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/random.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"
#include "kernels/scan.h"
#include "kernels/softmax.h"
#include "kernels/unscale.h"

namespace mixprec::kernels {

/// The kernels' names in table order; a kernel's index there identifies it to supports().
inline constexpr std::string_view kEntryNames[] = {
#define MIXPREC_ENTRY_NAME(entry) #entry,
    MIXPREC_KERNEL_ENTRIES(MIXPREC_ENTRY_NAME)
#undef MIXPREC_ENTRY_NAME
};
/// The index of kernel `name` (a name not in the list does not compile).
consteval std::size_t entry_index(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kEntryNames); ++i) {
    if (kEntryNames[i] == name) return i;
  }
  throw "not a kernel of the list (kernels/backend_entries.h)";
}

/// True if no dtype of a call is storage-only (fp8): what a backend whose kernels compute in
/// f32/bf16/f16 supports (cpu's computing kernels, cuda's).
inline bool computes_in(std::span<const DType> dtypes) {
  for (DType t : dtypes) {
    if (is_storage_only(t)) return false;
  }
  return true;
}

/// One backend: a name and one function per kernel. Each entry has exactly the signature and
/// contract of the kernels:: function of the same name (see the family headers). Tables are
/// filled with designated initializers (.unary = &cpu::unary), so two entries of the same
/// signature cannot be swapped by position.
struct Backend {
  const char* name;
  /// Whether this backend runs kernel `entry` (its entry_index) on these dtypes: every dtype of
  /// the call, in argument order (its DType arguments, and for a descriptor or strided operand
  /// the dtypes its for_each_dtype names: kernels/dtype_visit.h). Null: every entry it fills,
  /// any dtype.
  bool (*supports)(std::size_t entry, std::span<const DType> dtypes) = nullptr;
  /// The backend that runs what this one leaves empty or does not support, on the same memory
  /// (the reference, for cpu); null: none, such a call is a BackendError.
  const Backend& (*fallback)() = nullptr;
#define MIXPREC_BACKEND_FIELD(entry) decltype(&ref::entry) entry = nullptr;
  MIXPREC_KERNEL_ENTRIES(MIXPREC_BACKEND_FIELD)
#undef MIXPREC_BACKEND_FIELD
};

/// The backend kernels run on now: MIXPREC_BACKEND (cpu|ref|devsim; default cpu) or set_backend().
const Backend& backend();
/// The built-in backends: cpu, ref, and devsim (the reference on simulated device memory; see
/// mixprec/core/device.h).
const Backend& cpu_backend();
const Backend& ref_backend();
const Backend& devsim_backend();
/// The NVIDIA GPU backend (docs/cuda.md): the kernels written so far; empty without CUDA.
const Backend& cuda_backend();
/// The kernels for host memory under the active backend: the active one when its device is the
/// host (cpu, ref), the reference for devsim (whose kernels are the reference, so the bits agree),
/// cpu for cuda (whose kernels take device addresses only).
/// What the public conversions of raw host arrays (mixprec/kernels/convert_arrays.h) and the data loaders
/// run.
const Backend& host_backend();
/// Selects the backend by name for this process and makes its device current (devsim:0 for
/// devsim, cuda:0 for cuda, else cpu); returns the previous one's name. An unknown name throws ValueError naming
/// the known ones. Tensors already allocated stay where they are.
std::string set_backend(const std::string& name);
/// Makes `b` the active backend (a table of your own: see "Adding a backend" in
/// docs/ARCHITECTURE.md); returns the previous one. The current device is left as it is.
const Backend& set_backend(const Backend& b);
/// What MIXPREC_BACKEND asked for, if it named no backend (the warning printed once), else empty.
std::string backend_env_warning();

}  // namespace mixprec::kernels
