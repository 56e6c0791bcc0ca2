// The profiler's device clock (core/device_clock.h): marks numbered from 0 after each settle,
// times in mark order and never going back across settles, an interval that brackets real work
// at least as long as the work; on cuda either real event times or one BackendError.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/device_clock.h"
#include "mixprec/core/error.h"
#include "mixprec/core/gpu.h"
#include "mixprec/core/transfer.h"

namespace mixprec::detail {
namespace {

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(DeviceClock, HostMarksAreTheirTimesInOrderAcrossSettles) {
  for (const DeviceType type : {DeviceType::cpu, DeviceType::devsim}) {
    DeviceClock clock(Device{type, 0});
    EXPECT_EQ(clock.mark(), 0u);
    sleep_ms(3);
    EXPECT_EQ(clock.mark(), 1u);
    EXPECT_EQ(clock.pending(), 2u);
    const std::vector<std::uint64_t> first = clock.settle();
    ASSERT_EQ(first.size(), 2u);
    EXPECT_EQ(first[0], 0u) << "times count from the clock's first mark";
    EXPECT_GE(first[1] - first[0], 3'000'000u) << "the interval brackets a 3 ms sleep";
    EXPECT_EQ(clock.pending(), 0u);
    EXPECT_EQ(clock.mark(), 0u) << "marks are numbered afresh after a settle";
    const std::vector<std::uint64_t> second = clock.settle();
    ASSERT_EQ(second.size(), 1u);
    EXPECT_GE(second[0], first[1]) << "time never goes back across settles";
    EXPECT_TRUE(clock.settle().empty());
  }
}

TEST(DeviceClock, CudaTimesEventsOrRefusesWithTheInventorysReason) {
  DeviceClock clock(Device{DeviceType::cuda, 0});
  if (gpu_inventory().gpus.empty()) {
    EXPECT_THROW(clock.mark(), BackendError) << gpu_inventory().why_none;
    return;
  }
  // A real GPU: marks around device work settle to ordered times, over several settles (the
  // base event carried from one settle to the next).
  void* block = detail::device_allocate(64 << 20, Device{DeviceType::cuda, 0});
  ASSERT_NE(block, nullptr);
  std::uint64_t last = 0;
  for (int round = 0; round < 3; ++round) {
    clock.mark();
    device_memset(block, round, 64 << 20, Device{DeviceType::cuda, 0});
    clock.mark();
    const std::vector<std::uint64_t> t = clock.settle();
    ASSERT_EQ(t.size(), 2u);
    EXPECT_GE(t[0], last);
    EXPECT_GT(t[1], t[0]) << "a 64 MiB memset takes time on the GPU";
    last = t[1];
  }
  detail::device_release(block, 64 << 20, Device{DeviceType::cuda, 0});
}

}  // namespace
}  // namespace mixprec::detail
