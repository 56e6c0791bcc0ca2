#pragma once
/// The CPU's model name as the operating system reports it: what `mixprec env` prints and what
/// identifies a machine whose peaks are remembered (train/machine_peaks_memory.h).
#include <string>

namespace mixprec {

/// The first "model name" of /proc/cpuinfo, e.g. "AMD EPYC 7B12", or
/// "unknown (no 'model name' in /proc/cpuinfo)" where there is none (most arm64 kernels, or no
/// /proc). The real CPU's, whatever MIXPREC_CPU_PROFILE says.
std::string cpu_model_name();

}  // namespace mixprec
