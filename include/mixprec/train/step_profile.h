#pragma once
/// Profiles whole training steps of a built-in model (the steps `mixprec bench` times) op by op,
/// and puts each op on this machine's roofline: what `mixprec profile` prints.
#include <cstdint>
#include <string>

#include "mixprec/core/dtype.h"
#include "mixprec/core/transfer.h"
#include "mixprec/models/zoo.h"
#include "mixprec/runtime/profiler.h"

namespace mixprec::train {

/// This machine's measured ceilings, the two lines of its roofline.
struct MachinePeaks {
  double gflops = 0;            ///< best GEMM rate through mixprec::matmul in gemm_dtype, GFLOP/s
  DType gemm_dtype = DType::f32;
  double gbytes_per_s = 0;      ///< best large-copy rate (bytes read + written), GB/s
  /// The bf16 GEMM rate where it was measured too (0: not measured; bf16 rows then use gflops):
  /// a bf16 op's floor is its FLOPs at this rate, which native bf16 dot products double.
  double bf16_gflops = 0;
  std::int64_t gemm_n = 0;      ///< the GEMM measured was gemm_n x gemm_n x gemm_n
  std::int64_t copy_bytes = 0;  ///< size of the buffer copied
  /// This process's own samples of gflops, bf16_gflops and gbytes_per_s. measure_machine_peaks
  /// sets them equal to those; remember_best_peaks (train/machine_peaks_memory.h) raises the
  /// three to the best this machine has shown and keeps the samples here, for the reports.
  double measured_gflops = 0, measured_bf16_gflops = 0, measured_gbytes_per_s = 0;
  /// The file the best values were remembered in; empty when they are this process's samples
  /// (remembering off, or never asked for).
  std::string peaks_file;
  /// The ridge point in FLOP/byte: ops with a higher arithmetic intensity can reach the compute
  /// peak, ops below it are limited by memory bandwidth.
  double ridge() const { return gbytes_per_s > 0 ? gflops / gbytes_per_s : 0.0; }
};

/// Measures the peaks on the current threads: the best of `repeats` GEMMs in gemm_dtype (both
/// operands and the result; f32 accumulation) of size gemm_n
/// (after one untimed call that creates the oneDNN primitive) and the best of `repeats` parallel
/// copies of copy_mib MiB. Takes well under a second at the defaults. ValueError unless
/// gemm_n in [16, 8192], copy_mib in [1, 4096] and repeats in [1, 100].
MachinePeaks measure_machine_peaks(std::int64_t gemm_n = 1024, std::int64_t copy_mib = 64,
                                   int repeats = 5, DType gemm_dtype = DType::f32);

/// The GEMM size for measure_machine_peaks on the current device: host_n on the host (and on
/// devsim, whose kernels are the reference), 8192 on a GPU, whose Tensor Cores reach their rate
/// only on large products (on an H200, bench's 2048^3 bf16 product measured 454 TFLOP/s while the
/// GPT-2-small step's own GEMMs ran at 566 and PyTorch's 8192^3 at 804).
std::int64_t peak_gemm_n(std::int64_t host_n);

/// "compute-bound" when flops / bytes >= peaks.ridge(), "memory-bound" below it, "n/a" when the
/// op moved no bytes or did no arithmetic (a pure copy is "memory-bound" only if it did FLOPs).
const char* roofline_verdict(double flops, double bytes, const MachinePeaks& peaks);

/// An op row's floor in ms: its FLOPs at the GEMM peak of its dtype (bf16_gflops for bf16 where
/// measured, else gflops) or its bytes at the copy bandwidth, whichever takes longer: the time
/// the machine cannot go below for that work.
double floor_ms(const runtime::OpStats& s, const MachinePeaks& peaks);

/// What profile_training_steps measured.
struct StepProfile {
  std::string model;
  std::string precision;        ///< the resolved mode, e.g. "bf16"
  std::int64_t batch_size = 0;
  int threads = 0;
  int steps = 0, warmup = 0;
  MachinePeaks peaks;
  std::string device;           ///< where the steps ran ("cpu", "cuda:0", "devsim")
  double wall_ms = 0;           ///< wall time of the profiled steps, summed
  /// Host <-> device crossings during the profiled steps (core/transfer.h): downloads are host
  /// synchronisations; bytes count only what crossed to or from a device (0 on cpu).
  TransferStats transfers;
  runtime::ProfileData data;             ///< the op table, the casts, the "could run lower" list
};

/// Runs warmup unprofiled steps, then steps steps under a Profile session, each step the
/// StepBenchmark's (forward and loss under autocast, scaled backward, unscale, gradient norm,
/// optimizer step, scaler update, zero_grad). batch_size 0 = the model's default. ValueError on
/// an unknown model or precision, a batch size outside [0, 65536], steps outside [1, 100000] or
/// warmup outside [0, 100000]. sizes: the model's (StepBenchmark's options; 0 = its default).
StepProfile profile_training_steps(const std::string& model, const std::string& precision,
                                   std::int64_t batch_size, int steps, int warmup,
                                   const MachinePeaks& peaks, std::uint64_t seed = 0,
                                   const models::ModelOptions& sizes = {});

/// The profile as text: a header with the peaks (each as describe_peak shows it: best
/// remembered and this run's sample) and the ridge point, the op table sorted by
/// total time (op, phase, dtype, count, total ms, share %, GFLOP/s, bytes moved, FLOP/byte,
/// verdict, roof% = GFLOP/s over min(peak GFLOP/s, FLOP/B * peak GB/s); at most max_rows rows,
/// 0 = all), the casts, and the "could run lower" list.
std::string format_step_profile(const StepProfile& profile, std::size_t max_rows = 0);

/// The profile as a JSON object with the stable keys documented in docs/diagnostics.md: model,
/// precision, batch_size, threads, steps, warmup, machine{peak_gflops, peak_gbytes_per_s,
/// ridge_flop_per_byte, gemm_n, copy_bytes, peak_gflops_measured, peak_gbytes_per_s_measured,
/// peaks_file}, wall_ms, recorded_ms, unattributed_ms,
/// ops[{op, phase, dtype, count, total_ms, share_pct, flops, bytes, gflops, intensity, verdict,
/// roof_pct}],
/// casts{count, total_ms}, transfers{downloads_per_step, uploads_per_step, bytes_down_per_step,
/// bytes_up_per_step, downloads_by_reason{reason: count over the steps}}, could_run_lower[{op, phase, dtype, count, total_ms, share_pct, reason}],
/// could_run_lower_ms.
std::string to_json(const StepProfile& profile, int indent = 2);

}  // namespace mixprec::train
