// The collectives of data-parallel training, timed under mpirun on this machine: the
// deterministic all-reduce (and its two halves, which ZeRO-1 uses alone) of f32 buffers from 1 KiB
// to the seed MLP's 84 MB of gradients, on f32 and bf16 wires. Rank 0 prints one row per case
// (median of the repetitions, every rank timing the same barrier-aligned calls) and the
// latency-bandwidth fit t(n) = alpha + n_bytes / beta of the f32 all-reduce, the two terms of
// docs/distributed.md's cost model.
//   mpirun -np 2 [flags] build/bench/bench_allreduce [--max-mib 84]
// Not a Google Benchmark binary: its timing loop would run the ranks' iterations unaligned.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/dist/communicator.h"
#include "mixprec/dist/world.h"

namespace {

using mixprec::dist::Communicator;
using mixprec::dist::WireDType;

double median_seconds(const Communicator& comm, int reps, const std::function<void()>& call) {
  std::vector<double> times;
  call();  // warm-up: first-touch of buffers, connection set-up
  for (int i = 0; i < reps; ++i) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    times.push_back(comm.allreduce_max(local));  // a collective ends when its slowest rank does
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  double max_mib = 84.0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--max-mib") == 0 && i + 1 < argc) {
      max_mib = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: mpirun -np N bench_allreduce [--max-mib MIB]\n");
      return 2;
    }
  }
  try {
    const Communicator& comm = mixprec::dist::world();
    const bool print = comm.rank() == 0;
    if (print) {
      std::printf("ranks %d (%s)\n", comm.size(), mixprec::dist::mpi_library_version().c_str());
      std::printf("%-16s %-5s %12s %12s %12s\n", "op", "wire", "bytes(f32)", "median ms", "GB/s(f32)");
    }
    std::vector<std::size_t> sizes;
    for (std::size_t n = 256; static_cast<double>(n) * 4 <= max_mib * (1 << 20); n *= 8) sizes.push_back(n);
    sizes.push_back(static_cast<std::size_t>(max_mib * (1 << 20) / 4));
    double small_t = 0, large_t = 0;
    std::size_t small_n = 0, large_n = 0;
    for (std::size_t n : sizes) {
      std::vector<float> data(n);
      for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(comm.rank())) % 97) * 0.01f;
      const int reps = n >= (std::size_t{1} << 20) ? 7 : 30;
      struct Case { const char* op; WireDType wire; std::function<void()> call; };
      const std::vector<Case> cases{
          {"allreduce_sum", WireDType::f32, [&] { comm.allreduce_sum(data.data(), n); }},
          {"allreduce_sum", WireDType::bf16, [&] { comm.allreduce_sum(data.data(), n, WireDType::bf16); }},
          {"reduce_scatter", WireDType::f32, [&] { comm.reduce_scatter_sum(data.data(), n); }},
          {"allgather", WireDType::f32, [&] { comm.allgather(data.data(), n); }},
      };
      for (const Case& c : cases) {
        const double t = median_seconds(comm, reps, c.call);
        if (print) {
          std::printf("%-16s %-5s %12zu %12.3f %12.2f\n", c.op, mixprec::dist::name(c.wire), n * 4, t * 1e3,
                      static_cast<double>(n) * 4 / t / 1e9);
        }
        if (c.wire == WireDType::f32 && std::strcmp(c.op, "allreduce_sum") == 0) {
          if (small_n == 0) { small_n = n; small_t = t; }
          large_n = n;
          large_t = t;
        }
      }
    }
    if (print && large_n > small_n) {
      const double beta = static_cast<double>(large_n - small_n) * 4 / (large_t - small_t);
      const double alpha = small_t - static_cast<double>(small_n) * 4 / beta;
      std::printf("fit of the f32 all-reduce: alpha (latency) %.1f us, beta (bandwidth) %.2f GB/s of buffer\n",
                  alpha * 1e6, beta / 1e9);
    }
    comm.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    mixprec::dist::abort_job(1);
  }
  return 0;
}
