#pragma once
// The memory-bandwidth floor of the streaming benchmarks, measured in the benchmark's own binary:
// a parallel memcpy (one std::thread per hardware thread, contiguous slices) whose bytes read +
// written per second divide a kernel's bytes moved to give the fastest it could possibly run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mixprec/core/cpu_features.h"

namespace mixprec::bench {

/// Copies src to dst with one std::thread per hardware thread, each a contiguous slice.
inline void parallel_copy(const std::uint8_t* src, std::uint8_t* dst, std::size_t bytes) {
  const std::size_t threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t slice = (bytes + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t begin = std::min(bytes, t * slice);
    const std::size_t len = std::min(bytes, begin + slice) - begin;
    pool.emplace_back([=] { std::memcpy(dst + begin, src + begin, len); });
  }
  for (std::thread& th : pool) th.join();
}

/// Bytes read + written per second by parallel_copy of `bytes` (best of 5 passes after one
/// that first-touches the pages).
inline double copy_bandwidth(std::size_t bytes) {
  std::vector<std::uint8_t> src(bytes, 1), dst(bytes, 0);
  double best = 0;
  for (int pass = 0; pass < 6; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    parallel_copy(src.data(), dst.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pass > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / s);
  }
  return best;
}

/// Google Benchmark body of the copy itself (reported next to the kernels), state.range(0) bytes.
inline void bm_copy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<std::uint8_t> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    parallel_copy(src.data(), dst.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.counters["GB"] = benchmark::Counter(2.0 * static_cast<double>(bytes) * 1e-9,
                                            benchmark::Counter::kIsIterationInvariantRate);
}

/// Sets "GB" (rate of `bytes` per iteration), "floor_ms" (bytes / copy bandwidth) and
/// "x_floor" (wall-clock time per iteration / floor; `seconds` = wall time of the whole loop).
inline void set_floor_counters(benchmark::State& state, double bytes, double copy_bytes_per_s,
                               double seconds) {
  state.counters["GB"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double floor_s = bytes / copy_bytes_per_s;
  state.counters["floor_ms"] = floor_s * 1e3;
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["x_floor"] = iterations > 0 ? seconds / iterations / floor_s : 0.0;
}

/// Measures the copy bandwidth over `bytes`, records it (and the CPU flags) in the benchmark
/// context, registers the copy itself as benchmark `name`, and returns the bandwidth in bytes/s.
inline double register_copy_floor(const char* name, std::int64_t bytes) {
  benchmark::AddCustomContext("cpu_flags", mixprec::cpu_features().to_string());
  const double bytes_per_s = copy_bandwidth(static_cast<std::size_t>(bytes));
  benchmark::AddCustomContext("copy_GB_per_s", std::to_string(bytes_per_s * 1e-9));
  benchmark::RegisterBenchmark(name, bm_copy)->Arg(bytes)->UseRealTime()->Unit(benchmark::kMillisecond);
  return bytes_per_s;
}

}  // namespace mixprec::bench
