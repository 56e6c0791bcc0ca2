// Device timestamps for the profiler (device_clock.h): host steady clock on devices whose
// kernels finish before returning, CUDA events on a GPU.
#include "core/device_clock.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "core/cuda_runtime.h"

namespace mixprec::detail {
namespace {

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

DeviceClock::DeviceClock(Device device)
    : queued_(device.type == DeviceType::cuda) {}

DeviceClock::~DeviceClock() {
  for (void* e : events_) cuda_event_destroy(e);
  if (last_ != nullptr) cuda_event_destroy(last_);
}

DeviceClock::Mark DeviceClock::mark() {
  const auto m = static_cast<Mark>(count_++);
  if (!queued_) {
    const std::uint64_t now = steady_ns();
    if (!started_) origin_ns_ = now, started_ = true;
    host_.push_back(now - origin_ns_);
    return m;
  }
  if (m == events_.size()) events_.push_back(cuda_event_create());
  cuda_event_record(events_[m]);
  return m;
}

std::vector<std::uint64_t> DeviceClock::settle() {
  std::vector<std::uint64_t> times;
  if (!queued_) {
    times = std::move(host_);
    host_.clear();
    count_ = 0;
    return times;
  }
  if (count_ == 0) return times;
  cuda_event_wait(events_[count_ - 1]);
  times.resize(count_);
  // Each mark from the one before it: short intervals keep the float milliseconds of
  // cudaEventElapsedTime precise however long the session runs; summed in integer ns.
  std::uint64_t t = last_ns_;
  for (std::size_t i = 0; i < count_; ++i) {
    void* before = i == 0 ? last_ : events_[i - 1];
    if (before != nullptr) {
      const double ms = cuda_event_elapsed_ms(before, events_[i]);
      t += static_cast<std::uint64_t>(std::llround(std::max(0.0, ms) * 1e6));
    }
    times[i] = t;
  }
  // The last mark becomes the next settle's base; its event leaves the pool (a fresh one
  // replaces it when needed).
  if (last_ != nullptr) cuda_event_destroy(last_);
  last_ = events_[count_ - 1];
  events_.erase(events_.begin() + static_cast<std::ptrdiff_t>(count_ - 1));
  last_ns_ = t;
  count_ = 0;
  return times;
}

}  // namespace mixprec::detail
