#pragma once
// Timestamps taken in a device's queue of work, read later: how the profiler times an op on a
// GPU without waiting for it. A mark placed when an op starts and one placed when it returns
// are passed by the GPU when its kernels really start and end, so the difference is the op's
// device time even while the host runs ahead, and the gaps between ops are the GPU's idle time
// (or work no op recorded). Synchronising around every op instead, as the profiler once did,
// serialised the device: every op then waited for the host, and the GPU's idle time could not
// be seen.
//
// On the cpu and devsim devices a kernel has finished when its call returns, so a mark is the
// host's steady clock at once and settling waits for nothing.
#include <cstdint>
#include <vector>

#include "mixprec/core/device.h"

namespace mixprec::detail {

class DeviceClock {
 public:
  using Mark = std::uint32_t;
  /// Marks `device`'s queue (the device active when the clock is made, by the profiler).
  explicit DeviceClock(Device device);
  ~DeviceClock();
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  /// Places a mark after the work queued so far; never waits. Marks are numbered from 0 since
  /// the last settle().
  Mark mark();
  /// Number of marks placed since the last settle().
  std::size_t pending() const { return count_; }
  /// Waits until the device has passed every mark, and returns each mark's time in ns since the
  /// clock's origin (its first mark ever), in mark order; then forgets them, so the next mark is
  /// 0 again. Times are non-decreasing across calls.
  std::vector<std::uint64_t> settle();

 private:
  bool queued_;                      // cuda: marks are events read at settle()
  std::size_t count_ = 0;            // marks since the last settle()
  std::vector<std::uint64_t> host_;  // host clocks: the marks' times, as taken
  std::vector<void*> events_;        // cuda: a pool, reused after each settle()
  void* last_ = nullptr;             // cuda: the previous settle's last mark, the next's base
  std::uint64_t last_ns_ = 0;        // its time since the origin
  std::uint64_t origin_ns_ = 0;      // host clocks: the first mark's steady-clock time
  bool started_ = false;
};

}  // namespace mixprec::detail
