#include "train/progress.h"

#include <unistd.h>

#include <cstdio>

namespace mixprec::train::detail {

ProgressBar::ProgressBar(bool enabled, std::string label, std::int64_t total)
    : active_(enabled && isatty(STDERR_FILENO) == 1), label_(std::move(label)),
      total_(total > 0 ? total : 1), start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(std::int64_t done, const std::string& status) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double fraction = static_cast<double>(done) / static_cast<double>(total_);
  const int filled = static_cast<int>(fraction * kWidth);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = done > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r\033[K%s [%s] %lld/%lld  %s  %.1fs, ETA %.1fs", label_.c_str(),
               bar.c_str(), static_cast<long long>(done), static_cast<long long>(total_),
               status.c_str(), elapsed, eta);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!active_ || !drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace mixprec::train::detail
