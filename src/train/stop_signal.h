#pragma once
// SIGINT and SIGTERM as a request to stop training cleanly (a cluster's preemption notice, a
// Ctrl-C): while a StopSignals lives, the first such signal only sets a flag, which the Trainer
// reads after each optimizer step; a second one ends the process at once with _exit(128 + signal).
// Checkpoints and logs are only ever renamed into place complete (io/checkpoint.h,
// io/atomic_file.h), so that immediate exit leaves at worst a hidden temporary behind.
namespace mixprec::train::detail {

class StopSignals {
 public:
  /// install: take over SIGINT and SIGTERM with sigaction until destruction (false: do nothing,
  /// received() stays 0), the handler running on an alternate stack of the calling thread (see
  /// stop_signal.cpp for why), which must be the one that destroys it. StateError if another
  /// StopSignals is installed (the flag is global).
  explicit StopSignals(bool install);
  /// Restores the dispositions found at construction.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// The first stop signal received while installed (SIGINT or SIGTERM), or 0.
  int received() const;

 private:
  bool installed_ = false;
};

/// "SIGTERM", "SIGINT", or "a signal".
const char* signal_name(int signal);

}  // namespace mixprec::train::detail
