// An advisory directory lock with flock(2) (see directory_lock.h).
#include "mixprec/io/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "io/utc_time.h"

namespace mixprec::io {
namespace {

constexpr const char* kOp = "checkpoint lock";

std::string holder_text(const std::string& purpose) {
  char host[256] = "unknown host";
  ::gethostname(host, sizeof host - 1);
  return purpose + " (pid " + std::to_string(::getpid()) + " on host " + host + " since " + utc_timestamp_now() +
         ")";
}

// What the holder wrote (read through the same open file: the lock does not stop reading).
std::string read_holder(int fd) {
  std::string text;
  char buf[512];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    at += n;
    if (text.size() > 4096) break;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "another process (which has not recorded itself yet)" : text;
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& directory, const std::string& purpose) : directory_(directory) {
  make_directories(directory);
  const std::string path = directory + "/" + kDirectoryLockName;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  MIXPREC_CHECK(fd_ >= 0, ValueError, kOp, "cannot open '" << path << "': " << std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? read_holder(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    MIXPREC_CHECK(err != EWOULDBLOCK, ValueError, kOp,
                  "checkpoint directory '" << directory << "' is in use by " << holder
                                           << "; wait for it to end or choose another --checkpoint-dir");
    MIXPREC_CHECK(false, ValueError, kOp, "cannot lock '" << path << "': " << std::strerror(err));
  }
  // Ours now: record who holds it (best effort: the lock itself is what protects).
  const std::string text = holder_text(purpose) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd_, text.data(), text.size(), 0);
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace mixprec::io
