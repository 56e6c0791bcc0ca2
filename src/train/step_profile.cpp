// Whole training steps profiled op by op, the machine's roofline peaks, and the report (text and
// JSON) that `mixprec profile` prints.
#include "mixprec/train/step_profile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>

#include "core/parallel_chunks.h"
#include "mixprec/runtime/node.h"
#include "mixprec/core/error.h"
#include "mixprec/core/transfer.h"
#include "mixprec/runtime/runtime.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/models/zoo.h"
#include "mixprec/ops/nn_functional.h"
#include "mixprec/train/machine_peaks_memory.h"
#include "mixprec/train/step_bench.h"

namespace mixprec::train {

using runtime::OpStats;
using runtime::LowerPrecisionCandidate;
using runtime::Profile;
namespace {

constexpr const char* kOp = "profile";

double seconds_of(const std::function<void()>& fn) {
  synchronize(current_device());
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  synchronize(current_device());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

double share_pct(std::uint64_t ns, double wall_ms) {
  return wall_ms > 0 ? 100.0 * ms(ns) / wall_ms : 0.0;
}

double gflops_of(const OpStats& s) {
  return s.self_ns > 0 ? s.flops / static_cast<double>(s.self_ns) : 0.0;  // FLOP/ns = GFLOP/s
}

// The GEMM peak an op of this dtype is held to: bf16's own where it was measured (a CPU with
// AVX512_BF16, a GPU's Tensor Cores run bf16 at several times the f32 rate).
double peak_gflops_of(DType dtype, const MachinePeaks& peaks) {
  return dtype == DType::bf16 && peaks.bf16_gflops > 0 ? peaks.bf16_gflops : peaks.gflops;
}

// Attained share of the op's roof, min(peak compute of its dtype, intensity * peak bandwidth),
// in percent; negative when there is no roof to compare with.
double roof_pct(const OpStats& s, const MachinePeaks& peaks) {
  const double peak = peak_gflops_of(s.dtype, peaks);
  if (!(s.flops > 0) || !(s.bytes > 0) || !(peak > 0) || !(peaks.gbytes_per_s > 0)) return -1;
  const double roof = std::min(peak, s.flops / s.bytes * peaks.gbytes_per_s);
  return 100.0 * gflops_of(s) / roof;
}

}  // namespace

double floor_ms(const OpStats& s, const MachinePeaks& peaks) {
  const double gflops = peak_gflops_of(s.dtype, peaks);
  const double compute = gflops > 0 ? s.flops / (gflops * 1e9) : 0.0;
  const double memory = peaks.gbytes_per_s > 0 ? s.bytes / (peaks.gbytes_per_s * 1e9) : 0.0;
  return 1e3 * std::max(compute, memory);
}

namespace {

std::string format_bytes(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else if (b >= 1e3) std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

}  // namespace

std::int64_t peak_gemm_n(std::int64_t host_n) {
  return current_device().type == DeviceType::cuda ? 8192 : host_n;
}

MachinePeaks measure_machine_peaks(std::int64_t gemm_n, std::int64_t copy_mib, int repeats,
                                   DType gemm_dtype) {
  MIXPREC_CHECK(gemm_n >= 16 && gemm_n <= 8192, ValueError, kOp,
                "the peak GEMM size must be in [16, 8192], got " << gemm_n);
  MIXPREC_CHECK(copy_mib >= 1 && copy_mib <= 4096, ValueError, kOp,
                "the peak copy size must be in [1, 4096] MiB, got " << copy_mib);
  MIXPREC_CHECK(repeats >= 1 && repeats <= 100, ValueError, kOp,
                "repeats must be in [1, 100], got " << repeats);
  runtime::NoGradGuard no_grad;
  MachinePeaks p;
  p.gemm_n = gemm_n;
  p.gemm_dtype = gemm_dtype;
  const Tensor a = Tensor::randn({gemm_n, gemm_n}, 1, gemm_dtype);
  const Tensor b = Tensor::randn({gemm_n, gemm_n}, 2, gemm_dtype);
  matmul(a, b);  // creates the oneDNN primitive
  double best = 0;
  for (int r = 0; r < repeats; ++r) best = std::max(best, 1.0 / seconds_of([&] { matmul(a, b); }));
  p.gflops = 2.0 * static_cast<double>(gemm_n) * static_cast<double>(gemm_n) *
             static_cast<double>(gemm_n) * best / 1e9;

  p.copy_bytes = copy_mib << 20;
  const Device here = current_device();
  Tensor src, dst;
  std::function<void()> copy;
  if (here.type != DeviceType::cpu) {
    // The device's passes run at the device's copy bandwidth (a device-to-device copy).
    src = Tensor::zeros({p.copy_bytes / 4}, DType::f32, MemoryCategory::workspace);
    dst = Tensor::zeros({p.copy_bytes / 4}, DType::f32, MemoryCategory::workspace);
    copy = [&] {
      device_copy(dst.data_ptr(), src.data_ptr(), static_cast<std::size_t>(p.copy_bytes), here);
    };
  } else {
    // A parallel memcpy over buffers much larger than the caches; both are touched first so
    // page faults are not timed.
    src = Tensor::empty({p.copy_bytes / 4}, DType::f32, MemoryCategory::workspace, Device{});
    dst = Tensor::empty({p.copy_bytes / 4}, DType::f32, MemoryCategory::workspace, Device{});
    char* from = static_cast<char*>(src.data_ptr());
    char* to = static_cast<char*>(dst.data_ptr());
    std::memset(from, 1, static_cast<std::size_t>(p.copy_bytes));
    std::memset(to, 0, static_cast<std::size_t>(p.copy_bytes));
    copy = [&p, from, to] {
      parallel_chunks(p.copy_bytes, std::int64_t{1} << 20, [&](std::int64_t begin, std::int64_t len) {
        std::memcpy(to + begin, from + begin, static_cast<std::size_t>(len));
      });
    };
  }
  copy();
  best = 0;
  for (int r = 0; r < repeats; ++r) best = std::max(best, 1.0 / seconds_of(copy));
  p.gbytes_per_s = 2.0 * static_cast<double>(p.copy_bytes) * best / 1e9;  // read + write
  p.measured_gflops = p.gflops;
  p.measured_gbytes_per_s = p.gbytes_per_s;
  return p;
}

const char* roofline_verdict(double flops, double bytes, const MachinePeaks& peaks) {
  if (!(flops > 0) || !(bytes > 0) || !(peaks.ridge() > 0)) return "n/a";
  return flops / bytes >= peaks.ridge() ? "compute-bound" : "memory-bound";
}

StepProfile profile_training_steps(const std::string& model, const std::string& precision,
                                   std::int64_t batch_size, int steps, int warmup,
                                   const MachinePeaks& peaks, std::uint64_t seed,
                                   const models::ModelOptions& sizes) {
  MIXPREC_CHECK(steps >= 1 && steps <= 100000, ValueError, kOp,
                "--steps must be in [1, 100000], got " << steps);
  MIXPREC_CHECK(warmup >= 0 && warmup <= 100000, ValueError, kOp,
                "--warmup must be in [0, 100000], got " << warmup);
  train::StepBenchmark bench(model,
                             train::StepConfig{.precision = precision, .optimizer = "adam",
                                               .lr = 1e-3f, .scheduler = "none", .seed = seed},
                             batch_size, sizes);
  StepProfile r;
  r.model = models::model_spec(model).name;
  r.precision = bench.precision();
  r.batch_size = bench.batch_size();
  r.threads = num_threads();
  r.steps = steps;
  r.warmup = warmup;
  r.peaks = peaks;
  r.device = to_string(current_device());
  for (int i = 0; i < warmup; ++i) bench.step();
  Profile session;
  double wall_s = 0;
  const TransferStats before = transfer_stats();
  for (int i = 0; i < steps; ++i) wall_s += seconds_of([&] { bench.step(); });
  r.transfers = transfer_delta(before, transfer_stats());
  r.wall_ms = wall_s * 1e3;
  r.data = session.data();
  return r;
}

std::string format_step_profile(const StepProfile& p, std::size_t max_rows) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line,
                "profile: %s, precision %s, batch %lld, %d threads, %d profiled steps after %d "
                "warm-up\n",
                p.model.c_str(), p.precision.c_str(), static_cast<long long>(p.batch_size),
                p.threads, p.steps, p.warmup);
  os << line;
  std::snprintf(line, sizeof line,
                "machine: peak %.1f GFLOP/s (f32 GEMM %lld^3 through matmul), %.1f GB/s (copy of "
                "%lld MiB) -> ridge %.2f FLOP/byte\n",
                p.peaks.gflops, static_cast<long long>(p.peaks.gemm_n), p.peaks.gbytes_per_s,
                static_cast<long long>(p.peaks.copy_bytes >> 20), p.peaks.ridge());
  os << line;
  // Whether the floor is at this run's samples or at the best the machine has shown.
  os << "  " << name(p.peaks.gemm_dtype) << " GEMM  "
     << describe_peak(p.peaks.gflops, p.peaks.measured_gflops, "GFLOP/s", p.peaks.peaks_file) << "\n";
  if (p.peaks.bf16_gflops > 0) {
    os << "  bf16 GEMM "
       << describe_peak(p.peaks.bf16_gflops, p.peaks.measured_bf16_gflops, "GFLOP/s", p.peaks.peaks_file)
       << "\n";
  }
  os << "  copy      "
     << describe_peak(p.peaks.gbytes_per_s, p.peaks.measured_gbytes_per_s, "GB/s", p.peaks.peaks_file)
     << "\n";
  const double recorded = ms(p.data.recorded_ns);
  std::snprintf(line, sizeof line,
                "steps: %.2f ms in %d steps (%.2f ms/step); ops %.2f ms (%.1f%%), unattributed "
                "(autograd bookkeeping, allocation, glue) %.2f ms\n",
                p.wall_ms, p.steps, p.wall_ms / std::max(p.steps, 1), recorded,
                p.wall_ms > 0 ? 100.0 * recorded / p.wall_ms : 0.0,
                std::max(0.0, p.wall_ms - recorded));
  os << line;
  if (!p.device.empty() && p.device != "cpu") {
    // Ops are timed in the device's queue (core/device_clock.h), not by waiting around each, so
    // the steps run as unprofiled ones do and the ops' share is the device's busy time.
    std::snprintf(line, sizeof line,
                  "%s busy: %.1f%% of the steps' time inside recorded ops (timed by device "
                  "timestamps; the rest the device waited for the host or ran work no op "
                  "recorded)\n",
                  p.device.c_str(), p.wall_ms > 0 ? 100.0 * recorded / p.wall_ms : 0.0);
    os << line;
  }
  const double per = std::max(p.steps, 1);
  std::snprintf(line, sizeof line,
                "host transfers per step: %.1f downloads (host synchronisations), %.1f uploads; "
                "%.0f bytes down, %.0f bytes up (on %s)\n",
                static_cast<double>(p.transfers.downloads) / per,
                static_cast<double>(p.transfers.uploads) / per,
                static_cast<double>(p.transfers.bytes_down) / per,
                static_cast<double>(p.transfers.bytes_up) / per, to_string(current_device()).c_str());
  os << line;
  for (const auto& [why, count] : p.transfers.downloads_by_reason) {
    std::snprintf(line, sizeof line, "  download: %-40s %.1f per step\n", why.c_str(),
                  static_cast<double>(count) / per);
    os << line;
  }
  os << "\n";
  std::snprintf(line, sizeof line, "%-18s %-9s %-5s %7s %10s %7s %9s %11s %9s  %-13s %6s\n", "op",
                "phase", "dtype", "count", "total ms", "share%", "GFLOP/s", "bytes", "FLOP/B",
                "verdict", "roof%");
  os << line;
  const std::size_t n = max_rows == 0 ? p.data.ops.size() : std::min(max_rows, p.data.ops.size());
  for (std::size_t i = 0; i < n; ++i) {
    const OpStats& s = p.data.ops[i];
    char intensity[32] = "-", roof[32] = "-";
    if (s.bytes > 0) std::snprintf(intensity, sizeof intensity, "%.2f", s.flops / s.bytes);
    if (roof_pct(s, p.peaks) >= 0) std::snprintf(roof, sizeof roof, "%.0f", roof_pct(s, p.peaks));
    std::snprintf(line, sizeof line, "%-18s %-9s %-5s %7llu %10.2f %7.1f %9.2f %11s %9s  %-13s %6s\n",
                  s.op.c_str(), name(s.phase), name(s.dtype),
                  static_cast<unsigned long long>(s.count), ms(s.self_ns),
                  share_pct(s.self_ns, p.wall_ms), gflops_of(s), format_bytes(s.bytes).c_str(),
                  intensity, roofline_verdict(s.flops, s.bytes, p.peaks), roof);
    os << line;
  }
  if (n < p.data.ops.size()) os << "... " << p.data.ops.size() - n << " more rows\n";
  // The floor: every op at its roofline; what holds the step above it, largest excess first.
  struct Excess {
    std::string what;
    double ms, floor;
  };
  std::vector<Excess> above;
  double floor_total = 0;
  for (const OpStats& s : p.data.ops) {
    const double f = floor_ms(s, p.peaks);
    floor_total += f;
    above.push_back({s.op + " " + name(s.phase) + " " + name(s.dtype), ms(s.self_ns), f});
  }
  above.push_back({"unattributed (glue)", std::max(0.0, p.wall_ms - recorded), 0.0});
  std::sort(above.begin(), above.end(), [](const Excess& a, const Excess& b) {
    return a.ms - a.floor > b.ms - b.floor;
  });
  std::snprintf(line, sizeof line,
                "\nfloor: %.2f ms/step (each op's FLOPs at the GEMM peak of its dtype%s, or its "
                "bytes at %.1f GB/s); the step takes %.2fx its floor. Above it most:\n",
                floor_total / per,
                p.peaks.bf16_gflops > 0 ? " (bf16: measured apart)" : "", p.peaks.gbytes_per_s,
                floor_total > 0 ? p.wall_ms / floor_total : 0.0);
  os << line;
  for (std::size_t i = 0; i < std::min<std::size_t>(5, above.size()); ++i) {
    const Excess& e = above[i];
    if (e.ms - e.floor <= 0) break;
    std::snprintf(line, sizeof line, "  %-36s %9.2f ms/step, floor %8.2f, above it %8.2f ms/step\n",
                  e.what.c_str(), e.ms / per, e.floor / per, (e.ms - e.floor) / per);
    os << line;
  }
  std::snprintf(line, sizeof line, "\ncasts: %llu dtype casts, %.2f ms (%.1f%% of the steps)\n",
                static_cast<unsigned long long>(p.data.cast_count), ms(p.data.cast_ns),
                share_pct(p.data.cast_ns, p.wall_ms));
  os << line;
  std::uint64_t lower_ns = 0;
  for (const LowerPrecisionCandidate& c : p.data.could_run_lower) lower_ns += c.self_ns;
  std::snprintf(line, sizeof line,
                "could run lower (f32 time the autocast policy would let run in 16 bits): %.2f ms "
                "(%.1f%% of the steps)\n",
                ms(lower_ns), share_pct(lower_ns, p.wall_ms));
  os << line;
  if (p.data.could_run_lower.empty()) os << "  none\n";
  for (const LowerPrecisionCandidate& c : p.data.could_run_lower) {
    std::snprintf(line, sizeof line, "  %-18s %-9s %-5s %7llu %10.2f ms %6.1f%%  %s\n",
                  c.op.c_str(), name(c.phase), name(c.dtype),
                  static_cast<unsigned long long>(c.count), ms(c.self_ns),
                  share_pct(c.self_ns, p.wall_ms), c.reason.c_str());
    os << line;
  }
  return os.str();
}

std::string to_json(const StepProfile& p, int indent) {
  using nlohmann::json;
  const double recorded = ms(p.data.recorded_ns);
  json ops = json::array();
  for (const OpStats& s : p.data.ops) {
    ops.push_back({{"op", s.op},
                   {"phase", name(s.phase)},
                   {"dtype", name(s.dtype)},
                   {"count", s.count},
                   {"total_ms", ms(s.self_ns)},
                   {"share_pct", share_pct(s.self_ns, p.wall_ms)},
                   {"flops", s.flops},
                   {"bytes", s.bytes},
                   {"gflops", gflops_of(s)},
                   {"intensity", s.bytes > 0 ? json(s.flops / s.bytes) : json(nullptr)},
                   {"verdict", roofline_verdict(s.flops, s.bytes, p.peaks)},
                   {"roof_pct", roof_pct(s, p.peaks) >= 0 ? json(roof_pct(s, p.peaks)) : json(nullptr)},
                   {"floor_ms", floor_ms(s, p.peaks)}});
  }
  json lower = json::array();
  std::uint64_t lower_ns = 0;
  for (const LowerPrecisionCandidate& c : p.data.could_run_lower) {
    lower_ns += c.self_ns;
    lower.push_back({{"op", c.op},
                     {"phase", name(c.phase)},
                     {"dtype", name(c.dtype)},
                     {"count", c.count},
                     {"total_ms", ms(c.self_ns)},
                     {"share_pct", share_pct(c.self_ns, p.wall_ms)},
                     {"reason", c.reason}});
  }
  json j{{"model", p.model},
         {"precision", p.precision},
         {"batch_size", p.batch_size},
         {"threads", p.threads},
         {"steps", p.steps},
         {"warmup", p.warmup},
         {"device", p.device},
         {"machine",
          {{"peak_gflops", p.peaks.gflops},
           {"peak_bf16_gflops", p.peaks.bf16_gflops > 0 ? json(p.peaks.bf16_gflops) : json(nullptr)},
           {"peak_gbytes_per_s", p.peaks.gbytes_per_s},
           {"peak_gflops_measured", p.peaks.measured_gflops},
           {"peak_bf16_gflops_measured",
            p.peaks.measured_bf16_gflops > 0 ? json(p.peaks.measured_bf16_gflops) : json(nullptr)},
           {"peak_gbytes_per_s_measured", p.peaks.measured_gbytes_per_s},
           {"peaks_file", p.peaks.peaks_file.empty() ? json(nullptr) : json(p.peaks.peaks_file)},
           {"ridge_flop_per_byte", p.peaks.ridge()},
           {"gemm_n", p.peaks.gemm_n},
           {"copy_bytes", p.peaks.copy_bytes}}},
         {"wall_ms", p.wall_ms},
         {"floor_ms", [&] {
            double f = 0;
            for (const OpStats& s : p.data.ops) f += floor_ms(s, p.peaks);
            return f;
          }()},
         {"recorded_ms", recorded},
         {"unattributed_ms", std::max(0.0, p.wall_ms - recorded)},
         {"ops", ops},
         {"casts", {{"count", p.data.cast_count}, {"total_ms", ms(p.data.cast_ns)}}},
         {"transfers",
          {{"downloads_per_step", static_cast<double>(p.transfers.downloads) / std::max(p.steps, 1)},
           {"uploads_per_step", static_cast<double>(p.transfers.uploads) / std::max(p.steps, 1)},
           {"bytes_down_per_step", static_cast<double>(p.transfers.bytes_down) / std::max(p.steps, 1)},
           {"bytes_up_per_step", static_cast<double>(p.transfers.bytes_up) / std::max(p.steps, 1)},
           {"downloads_by_reason", p.transfers.downloads_by_reason}}},
         {"could_run_lower", lower},
         {"could_run_lower_ms", ms(lower_ns)}};
  return j.dump(indent);
}

}  // namespace mixprec::train
