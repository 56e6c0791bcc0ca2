#pragma once
// N ranks as threads of one process, for testing collective code without mpirun: each thread
// gets a Communicator whose collectives meet the other threads' through shared memory and a
// std::barrier. Sums add in rank order like the MPI communicator, so results are bit-identical
// on every rank; a 16-bit wire rounds what "travels" as the MPI communicator does. The
// non-blocking start_reduce_scatter_sum is not simulated (it throws). If a rank throws, the others' collectives throw too (instead of
// waiting forever), and run() rethrows the first rank's exception.
#include <atomic>
#include <barrier>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/half.h"
#include "mixprec/dist/communicator.h"

namespace mixprec::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size) {}

  /// Runs fn(comm) once per rank, each on its own thread, and waits for all.
  void run(const std::function<void(const dist::Communicator&)>& fn) {
    Shared shared(size_);
    std::vector<std::thread> threads;
    std::exception_ptr first;
    std::mutex mu;
    for (int r = 0; r < size_; ++r) {
      threads.emplace_back([&, r] {
        Rank comm(shared, r);
        try {
          fn(comm);
        } catch (...) {
          {
            std::lock_guard<std::mutex> lock(mu);
            if (!first) first = std::current_exception();
          }
          shared.failed = true;
          shared.barrier.arrive_and_drop();  // release the ranks waiting for this one
        }
      });
    }
    for (std::thread& t : threads) t.join();
    if (first) std::rethrow_exception(first);
  }

 private:
  struct Shared {
    explicit Shared(int n)
        : size(n), barrier(n), data(static_cast<std::size_t>(n)), counts(data.size()),
          values(data.size()), strings(data.size()) {}
    int size;
    std::barrier<> barrier;
    std::vector<float*> data;
    std::vector<std::size_t> counts;
    std::vector<double> values;
    std::vector<std::string*> strings;
    std::atomic<bool> failed{false};
  };

  class Rank final : public dist::Communicator {
   public:
    Rank(Shared& s, int rank) : s_(s), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return s_.size; }
    void reduce_scatter_sum(float* data, std::size_t n,
                            dist::WireDType wire = dist::WireDType::f32) const override {
      publish(data, n);
      const dist::Shard mine = my_shard(n);
      std::vector<float> sum(mine.count);
      for (std::size_t i = 0; i < mine.count; ++i) {
        float acc = on_wire(s_.data[0][mine.begin + i], wire);
        for (std::size_t r = 1; r < s_.data.size(); ++r) acc += on_wire(s_.data[r][mine.begin + i], wire);
        sum[i] = acc;
      }
      meet();  // every rank has read every buffer before any is overwritten
      for (std::size_t i = 0; i < mine.count; ++i) data[mine.begin + i] = sum[i];
    }
    /// Not simulated (nothing tested with a ThreadGroup needs it): StateError.
    std::unique_ptr<dist::PendingReduction> start_reduce_scatter_sum(
        float*, std::size_t, dist::Shard, int, dist::WireDType = dist::WireDType::f32) const override {
      MIXPREC_CHECK(false, StateError, "ThreadGroup",
                    "start_reduce_scatter_sum is not simulated; test it under mpirun");
      return nullptr;
    }
    void allgather(float* data, std::size_t n,
                   dist::WireDType wire = dist::WireDType::f32) const override {
      const dist::Shard mine = my_shard(n);
      for (std::size_t i = mine.begin; i < mine.end(); ++i) data[i] = on_wire(data[i], wire);
      publish(data, n);
      std::vector<float> all(data, data + n);
      for (int k = 0; k < s_.size; ++k) {
        const dist::Shard theirs = shard(n, k);
        for (std::size_t i = theirs.begin; i < theirs.end(); ++i) all[i] = s_.data[static_cast<std::size_t>(k)][i];
      }
      meet();
      for (std::size_t i = 0; i < n; ++i) data[i] = all[i];
    }
    using dist::Communicator::allreduce_sum;
    double allreduce_sum(double value) const override {
      s_.values[idx()] = value;
      meet();
      double sum = 0.0;
      for (double v : s_.values) sum += v;
      meet();
      return sum;
    }
    double allreduce_max(double value) const override {
      s_.values[idx()] = value;
      meet();
      double m = -std::numeric_limits<double>::infinity();
      for (double v : s_.values) m = std::isnan(v) || std::isnan(m) ? std::nan("") : std::max(m, v);
      meet();
      return m;
    }
    void broadcast(std::string& value, int root) const override {
      MIXPREC_CHECK(root >= 0 && root < s_.size, ValueError, "ThreadGroup", "bad root " << root);
      s_.strings[idx()] = &value;
      meet();
      const std::string copy = *s_.strings[static_cast<std::size_t>(root)];
      meet();
      value = copy;
    }
    void barrier() const override { meet(); }
    std::string name() const override { return "thread rank " + std::to_string(rank_); }

   private:
    std::size_t idx() const { return static_cast<std::size_t>(rank_); }
    /// Shows the other ranks this rank's buffer (the same size on every rank) until the next meet.
    void publish(float* data, std::size_t n) const {
      s_.data[idx()] = data;
      s_.counts[idx()] = n;
      meet();
      for (std::size_t c : s_.counts) {
        MIXPREC_CHECK(c == n, ValueError, "ThreadGroup", "buffer sizes differ between ranks");
      }
    }
    /// v as it arrives over a wire of that format (rounded to nearest even for 16-bit ones).
    static float on_wire(float v, dist::WireDType wire) {
      if (wire == dist::WireDType::bf16) return static_cast<float>(bfloat16(v));
      if (wire == dist::WireDType::f16) return static_cast<float>(float16(v));
      return v;
    }
    void meet() const {
      s_.barrier.arrive_and_wait();
      MIXPREC_CHECK(!s_.failed, StateError, "ThreadGroup", "another rank failed");
    }
    Shared& s_;
    int rank_;
  };

  int size_;
};

}  // namespace mixprec::testing
