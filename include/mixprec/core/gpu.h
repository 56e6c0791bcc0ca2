#pragma once
/// The NVIDIA GPUs this process can use, or exactly why there are none: what `mixprec env` lists
/// and what `--device cuda[:N]` checks before anything runs (docs/cuda.md).
#include <cstddef>
#include <string>
#include <vector>

namespace mixprec {

/// One GPU as the CUDA runtime reports it.
struct GpuInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  ///< compute capability, e.g. 9.0 for an H100
  int sm_count = 0;
  std::size_t memory_bytes = 0;
  /// Tensor-core input types of this generation: fp16 from sm_70 (Volta), tf32 and bf16 from
  /// sm_80 (Ampere), fp8 (e4m3/e5m2) from sm_89 (Ada, Hopper).
  bool tensor_fp16 = false, tensor_tf32 = false, tensor_bf16 = false, tensor_fp8 = false;
};

/// The GPUs, or the reason there are none.
struct GpuInventory {
  bool built_with_cuda = false;  ///< this library was built with MIXPREC_CUDA
  std::vector<GpuInfo> gpus;
  /// Empty when gpus is not; else one line: a build without CUDA, no NVIDIA driver (the
  /// runtime's error named), or no GPU.
  std::string why_none;
};

/// Queried once per process (the CUDA runtime's answer does not change while it runs).
const GpuInventory& gpu_inventory();

/// The tensor-core types of a compute capability (what GpuInfo's flags hold).
GpuInfo tensor_core_types(int cc_major, int cc_minor);

/// Throws BackendError with one line if cuda:index cannot be used: why_none, or "no GPU N"
/// naming how many there are.
void require_gpu(int index);

}  // namespace mixprec
