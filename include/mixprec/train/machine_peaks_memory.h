#pragma once
/// The best peaks this machine has shown, remembered across processes. The hardware floor of
/// `mixprec bench` and `mixprec profile` puts each op at the GEMM rate and copy bandwidth of the
/// machine (step_profile.h, floor_ms); one process's sample of them moves a lot on a shared
/// machine (copies of 11.5, 16.9 and 22.7 GB/s in three runs on one 2-core VM), and a slow
/// sample makes a step look closer to its floor than it is. So the floor takes the most that
/// repeated measurements under the same conditions have shown: a limit the step cannot beat.
///
/// The file: $MIXPREC_PEAKS_FILE if set and not empty (`off`: remember nothing, use this run's
/// samples), else $XDG_CACHE_HOME/mixprec/machine_peaks.json (an absolute XDG_CACHE_HOME only,
/// as the XDG spec says), else $HOME/.cache/mixprec/machine_peaks.json. It is JSON: version 1,
/// and per machine key (machine_peaks_key) the best value of each peak, e.g.
/// "gemm_gflops f32 n=2048", "gemm_gflops bf16 n=2048", "copy_gbytes_per_s bytes=67108864".
/// Deleting it forgets the peaks.
#include <string>

#include "mixprec/train/step_profile.h"

namespace mixprec::train {

/// The file of remembered peaks, as the environment says now; empty when remembering is off:
/// MIXPREC_PEAKS_FILE=off, or none of MIXPREC_PEAKS_FILE, XDG_CACHE_HOME and HOME set.
std::string machine_peaks_file();

/// The machine and the conditions its peaks are remembered under: the CPU model name, the
/// logical CPU count, the compute threads in use (num_threads()), the ISA cap (max_isa()), the
/// kernel backend and the current device (a GPU with its name), e.g.
/// "AMD EPYC 7B12 | logical CPUs 2 | threads 2 | isa avx2 | backend cpu | device cpu".
/// The GEMM's dtype and size and the copy's size are part of each peak's own key.
std::string machine_peaks_key();

/// measured's gflops (under its gemm_dtype and gemm_n), bf16_gflops (under gemm_n) and
/// gbytes_per_s (under copy_bytes), each raised to the best remembered for machine_peaks_key();
/// a sample above the remembered value is remembered in its place (the file is rewritten only
/// then, atomically, under a lock on "<file>.lock" so that concurrent runs lose no maximum). A
/// sample that is not finite and positive (0: not measured) is neither remembered nor raised.
/// The result keeps the samples in measured_gflops, measured_bf16_gflops and
/// measured_gbytes_per_s, and the file in peaks_file; with remembering off it is the samples,
/// with peaks_file empty. The file never makes it throw: one that cannot be read, parsed or
/// written gives one warning on stderr ("mixprec: warning: machine peaks: ..."), once per
/// process, naming it and what to do; the samples are used, and a damaged file is replaced
/// where it can be.
MachinePeaks remember_best_peaks(const MachinePeaks& measured);

/// A peak as the reports print it: "22.7 GB/s (best remembered; this run 16.9 GB/s,
/// ~/.cache/mixprec/machine_peaks.json)" when file is not empty ($HOME written as ~), else
/// "16.9 GB/s (this run; not remembered)". unit: e.g. "GB/s", "GFLOP/s".
std::string describe_peak(double value, double measured, const char* unit, const std::string& file);

}  // namespace mixprec::train
