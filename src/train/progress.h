#pragma once
// A one-line progress bar with ETA, redrawn on stderr when it is a terminal; silent otherwise
// (logs then get one plain line per epoch from the caller instead of carriage-return noise).
#include <chrono>
#include <cstdint>
#include <string>

namespace mixprec::train::detail {

class ProgressBar {
 public:
  /// enabled: draw only if also stderr is a terminal.
  ProgressBar(bool enabled, std::string label, std::int64_t total);
  /// Redraws (at most ~10 times per second) with `done` of `total` items and a status text.
  void update(std::int64_t done, const std::string& status);
  /// Erases the bar so the next line starts clean.
  void finish();

 private:
  bool active_;
  std::string label_;
  std::int64_t total_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
};

}  // namespace mixprec::train::detail
