#pragma once
/// An advisory lock on a directory, so that two processes never write checkpoints into the same
/// one: `mixprec train --checkpoint-dir DIR` holds DIR/.mixprec-lock for its whole run. The
/// lock is flock(2) on that file, so the kernel releases it when the process ends in any way
/// (kill -9 included): there is no stale lock to clean up. The file also records who holds it
/// (pid, host, start time, what for), which is what the second process's error reports.
#include <string>

namespace mixprec::io {

/// The lock file's name inside a locked directory (checkpoint listings skip dot files).
inline constexpr const char* kDirectoryLockName = ".mixprec-lock";

class DirectoryLock {
 public:
  /// Creates `directory` (and its parents) if needed and takes its lock, recording `purpose`
  /// (e.g. "mixprec train"). ValueError if the directory cannot be created or the lock file
  /// cannot be opened, and, when another process holds the lock, a ValueError naming the
  /// directory and the holder: "checkpoint directory 'DIR' is in use by mixprec train (pid 123 on
  /// host h since 2026-11-24T10:00:00Z); wait for it to end or choose another directory".
  DirectoryLock(const std::string& directory, const std::string& purpose);
  /// Releases the lock (the file stays: removing it would race with a process taking it).
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  const std::string& directory() const { return directory_; }

 private:
  std::string directory_;
  int fd_ = -1;
};

}  // namespace mixprec::io
