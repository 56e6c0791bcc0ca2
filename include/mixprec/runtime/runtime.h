#pragma once
/// Process-wide runtime settings and facts: the number of compute threads and the versions of the
/// backends, for logs and reports.
#include <string>

namespace mixprec {

/// Sets the number of threads used by our kernels and by oneDNN (OpenMP); n >= 1, else ValueError.
void set_num_threads(int n);
/// The number of threads kernels will use.
int num_threads();
/// oneDNN's version as "major.minor.patch" and the CPU ISA it dispatches to, e.g.
/// "oneDNN 2.6.3 (cpu isa: Intel AVX-512 with AVX512BW, AVX512VL, and AVX512DQ extensions)".
std::string onednn_description();
/// The kernel backend that runs: "cpu" (Highway + oneDNN) or "ref" (the scalar reference), chosen
/// by MIXPREC_BACKEND.
std::string kernel_backend();
/// Runs what follows on `device`: "cpu" (the host backend MIXPREC_BACKEND chose: cpu or ref),
/// "devsim" (the simulated device) or "cuda[:N]". Throws ValueError for text that names no
/// device, and BackendError with one line saying why a device cannot be used: a build without
/// CUDA, no NVIDIA driver, no GPU, no GPU N. On cuda, a kernel the CUDA backend does not have
/// yet is a BackendError naming it when first called (docs/cuda.md says which exist).
void set_device(const std::string& device);

}  // namespace mixprec
