// train::detail::StopSignals: the first SIGINT/SIGTERM only sets the flag, a second one exits at
// once with 128 + signal, the previous dispositions come back, and only one may be installed.
#include <gtest/gtest.h>

#include <signal.h>

#include <csignal>

#include "mixprec/core/error.h"
#include "train/stop_signal.h"

using mixprec::train::detail::StopSignals;

namespace {

void (*disposition(int sig))(int) {
  struct sigaction now {};
  ::sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

}  // namespace

TEST(TrainStopSignal, FirstSignalOnlySetsTheFlagAndTheOldHandlersComeBack) {
  const auto old_term = disposition(SIGTERM), old_int = disposition(SIGINT);
  {
    const StopSignals signals(true);
    EXPECT_EQ(signals.received(), 0);
    ASSERT_EQ(::raise(SIGTERM), 0);  // the process survives: only the flag is set
    EXPECT_EQ(signals.received(), SIGTERM);
  }
  EXPECT_EQ(disposition(SIGTERM), old_term);
  EXPECT_EQ(disposition(SIGINT), old_int);
  {
    // A new installation starts with a clear flag; SIGINT counts the same.
    const StopSignals signals(true);
    EXPECT_EQ(signals.received(), 0);
    ASSERT_EQ(::raise(SIGINT), 0);
    EXPECT_EQ(signals.received(), SIGINT);
  }
}

TEST(TrainStopSignal, NotInstalledChangesNothing) {
  const auto old_term = disposition(SIGTERM);
  const StopSignals signals(false);
  EXPECT_EQ(disposition(SIGTERM), old_term);
  EXPECT_EQ(signals.received(), 0);
}

TEST(TrainStopSignal, OnlyOneInstallationAtATime) {
  const StopSignals first(true);
  EXPECT_THROW(StopSignals second(true), mixprec::StateError);
  const StopSignals off(false);  // not installing is always fine
}

TEST(TrainStopSignalDeathTest, SecondSignalExitsAtOnceWith128PlusTheSignal) {
  // Re-executes the test binary for the child (safe with the threads a fork would copy);
  // qemu-user cannot, so scripts/check-arm64.sh leaves this test out by name.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const StopSignals signals(true);
        ::raise(SIGTERM);
        ::raise(SIGTERM);
        std::_Exit(0);  // not reached
      },
      ::testing::ExitedWithCode(128 + SIGTERM), "second SIGTERM: exiting at once");
  EXPECT_EXIT(
      {
        const StopSignals signals(true);
        ::raise(SIGINT);
        ::raise(SIGINT);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(128 + SIGINT), "second SIGINT: exiting at once");
}
