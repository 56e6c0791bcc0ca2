#pragma once
// Private POSIX helpers shared by atomic_file.cpp and checkpoint.cpp.
#include <unistd.h>

#include <string>
#include <string_view>

namespace mixprec::io::detail {

/// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  /// Closes now and reports close's own error (NFS reports write errors there).
  int close_checked() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

/// Creates or truncates path, writes bytes, fsyncs and closes it; on failure removes the file and
/// throws ValueError(op, "cannot write '<shown>': <strerror>") (shown: the path the caller's
/// user asked for, when path is a temporary name; empty means path).
void write_file_synced(const std::string& path, std::string_view bytes, const char* op,
                       const std::string& shown = {});

/// fsyncs a directory so renames and creations inside it survive a crash; ValueError(op, ...) on
/// failure. Filesystems that cannot fsync directories (EINVAL) are accepted silently.
void sync_directory(const std::string& dir, const char* op);

/// The directory holding path ("." for a bare file name).
std::string parent_directory(const std::string& path);

}  // namespace mixprec::io::detail
